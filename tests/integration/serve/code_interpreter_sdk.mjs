// The real @e2b/code-interpreter SDK against `space serve` (env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY):
// its default template, state between calls, streamed output, results of every kind the SDK reads (text,
// HTML, JSON, PNG, chart, DataFrame data), errors, contexts, languages, per-call environment variables
// and timeouts; and the sandbox's port needing its access token.
import { Sandbox } from '@e2b/code-interpreter'
import assert from 'node:assert/strict'

let checks = 0
const check = async (name, fn) => {
	console.log('code_interpreter_sdk: ' + name)
	await fn()
	checks++
}

const t0 = Date.now()
const sbx = await Sandbox.create({ timeoutMs: 600_000 })
console.log(`code_interpreter_sdk: created ${sbx.sandboxId} in ${Date.now() - t0} ms`)

await check('state between calls', async () => {
	await sbx.runCode('x = 1')
	const e = await sbx.runCode('x + 1')
	assert.equal(e.text, '2')
	assert.equal(e.error, undefined)
	assert.ok(e.executionCount >= 2, `execution count ${e.executionCount}`)
})

await check('stdout and stderr as they come', async () => {
	const seen = []
	const start = Date.now()
	const e = await sbx.runCode('import sys, time\nprint("one", flush=True)\ntime.sleep(1.5)\nprint("two")\nprint("warn", file=sys.stderr)', {
		onStdout: (m) => seen.push([Date.now() - start, m.line]),
	})
	const end = Date.now() - start
	assert.deepEqual(e.logs.stdout.join(''), 'one\ntwo\n')
	assert.deepEqual(e.logs.stderr.join(''), 'warn\n')
	assert.ok(seen.length >= 2, JSON.stringify(seen))
	assert.ok(seen[0][0] < end - 1000, `the first line came at ${seen[0][0]} ms of ${end}: not streamed`)
})

await check('errors', async () => {
	let cb = null
	const e = await sbx.runCode('def f():\n    return 1 / 0\nf()', { onError: (err) => { cb = err } })
	assert.equal(e.error.name, 'ZeroDivisionError')
	assert.equal(e.error.value, 'division by zero')
	assert.match(e.error.traceback, /ZeroDivisionError/)
	assert.match(e.error.traceback, /1 \/ 0/)
	assert.equal(cb.name, 'ZeroDivisionError')
	// The context survives its errors.
	assert.equal((await sbx.runCode('x')).text, '1')
})

await check('rich results: HTML and JSON', async () => {
	const e = await sbx.runCode(
		'class R:\n    def __repr__(self): return "R()"\n    def _repr_html_(self): return "<b>r</b>"\n' +
		'    def _repr_json_(self): return {"k": [1, 2]}\nR()')
	const r = e.results.find((r) => r.isMainResult)
	assert.equal(r.text, 'R()')
	assert.equal(r.html, '<b>r</b>')
	assert.deepEqual(r.json, { k: [1, 2] })
	assert.ok(r.formats().includes('html') && r.formats().includes('json'), r.formats().join())
})

await check('a matplotlib figure: PNG and chart', async () => {
	const e = await sbx.runCode(
		'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9], label="squares")\n' +
		'plt.title("Squares")\nplt.xlabel("n")\nplt.ylabel("n^2")\nplt.show()')
	assert.equal(e.error, undefined, JSON.stringify(e.error))
	const fig = e.results.find((r) => r.png)
	assert.ok(fig, 'no PNG result: ' + JSON.stringify(e.results.map((r) => r.formats())))
	assert.equal(Buffer.from(fig.png, 'base64').subarray(1, 4).toString(), 'PNG')
	assert.ok(fig.chart, 'no chart: ' + JSON.stringify(Object.keys(fig.raw)))
	assert.equal(fig.chart.type, 'line')
	assert.equal(fig.chart.title, 'Squares')
	assert.ok(fig.chart.elements.length >= 1)
})

await check('a DataFrame: HTML and data', async () => {
	const e = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
	assert.equal(e.error, undefined, JSON.stringify(e.error))
	const r = e.results.find((r) => r.isMainResult)
	assert.match(r.html, /<table/)
	assert.ok(r.data, 'no data: ' + JSON.stringify(Object.keys(r.raw)))
	assert.match(r.text, /a +b/)
	assert.match(JSON.stringify(r.data), /"x"/)
})

await check('numpy', async () => {
	assert.equal((await sbx.runCode('import numpy as np\nint(np.arange(10).sum())')).text, '45')
})

await check('envs apply to one call', async () => {
	assert.equal((await sbx.runCode('import os\nos.environ["SPACE_T"]', { envs: { SPACE_T: 'v1' } })).text, "'v1'")
	assert.equal((await sbx.runCode('str(os.environ.get("SPACE_T"))')).text, "'None'")
})

await check('contexts', async () => {
	const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
	assert.ok(ctx.id, JSON.stringify(ctx))
	assert.equal(ctx.language, 'python')
	await sbx.runCode('y = 5', { context: ctx })
	assert.equal((await sbx.runCode('y', { context: ctx })).text, '5')
	assert.equal((await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text, "'/tmp'")
	assert.equal((await sbx.runCode('y')).error?.name, 'NameError') // the default context is another
	assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
	await sbx.restartCodeContext(ctx)
	assert.equal((await sbx.runCode('y', { context: ctx })).error?.name, 'NameError')
	await sbx.removeCodeContext(ctx.id)
	assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
	await assert.rejects(sbx.runCode('1', { context: ctx }))
})

await check('languages', async () => {
	assert.equal((await sbx.runCode('6 * 7', { language: 'python' })).text, '42')
	await assert.rejects(sbx.runCode('1', { language: 'cobol' }))
	await assert.rejects(sbx.createCodeContext({ language: 'cobol' }))
})

await check('a timeout interrupts, and the context goes on', async () => {
	const start = Date.now()
	await assert.rejects(sbx.runCode('import time\ntime.sleep(60)', { timeoutMs: 2000 }))
	assert.ok(Date.now() - start < 20000, `the timeout took ${Date.now() - start} ms`)
	assert.equal((await sbx.runCode('x + 41')).text, '42')
})

await check('the port needs the access token', async () => {
	const res = await fetch(`${process.env.E2B_SANDBOX_URL}/contexts`, {
		headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999' },
	})
	assert.equal(res.status, 401)
})

await sbx.kill()
console.log(`code_interpreter_sdk: ${checks} checks passed`)
