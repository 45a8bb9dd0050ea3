// The real @e2b/code-interpreter JS SDK against share/code-interpreter/space_kernel.py, without a sandbox:
// the kernel runs on a loopback port and the SDK's sandbox URL (E2B_SANDBOX_URL's option) points at it,
// once directly (HTTP/1.1, chunked answers) and once through a relay that passes requests on as HTTP/1.0
// with Connection: close, as `space serve` does (answers end with the connection).
// Env: SPACE_KERNEL_SCRIPT (the kernel), PYTHON (python3 by default).
import { Sandbox, NotFoundError, SandboxError, TimeoutError } from '@e2b/code-interpreter'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import net from 'node:net'

const t00 = Date.now()
const step = (s) => console.log(`code_kernel_sdk: [${((Date.now() - t00) / 1000).toFixed(1)}s] ${s}`)
const kernelPath = process.env.SPACE_KERNEL_SCRIPT
assert.ok(kernelPath, 'SPACE_KERNEL_SCRIPT names space_kernel.py')

function startKernel() {
	const p = spawn(process.env.PYTHON || 'python3', [kernelPath], {
		env: { ...process.env, SPACE_KERNEL_HOST: '127.0.0.1', SPACE_KERNEL_PORT: '0', SPACE_KERNEL_EXIT_WITH_STDIN: '1',
			SPACE_KERNEL_KEEPALIVE: '1' },
		stdio: ['pipe', 'inherit', 'pipe'], // the kernel ends when this process does, however it ends
	})
	return new Promise((resolve, reject) => {
		let err = ''
		p.stderr.on('data', (d) => {
			err += d
			const m = /listening on 127\.0\.0\.1:(\d+)/.exec(err)
			if (m) resolve({ proc: p, port: Number(m[1]) })
		})
		p.on('exit', (code) => reject(new Error(`the kernel exited (${code}): ${err}`)))
	})
}

// A relay in the manner of `space serve`'s port proxy: the request goes on as HTTP/1.0 with Connection: close;
// the answer comes back byte for byte and ends when the kernel closes. Like that proxy, it notices a caller
// that left only when it has something to write to it (the kernel's keepalive lines).
function startRelay(port) {
	const server = net.createServer((client) => {
		let head = Buffer.alloc(0)
		let upstream = null
		client.on('data', (d) => {
			if (upstream) return upstream.write(d)
			head = Buffer.concat([head, d])
			const end = head.indexOf('\r\n\r\n')
			if (end < 0) return
			const lines = head.subarray(0, end).toString().split('\r\n')
			const rest = head.subarray(end + 4)
			const [method, path] = lines[0].split(' ')
			const kept = lines.slice(1).filter((l) => !/^(connection|keep-alive|transfer-encoding):/i.test(l))
			upstream = net.connect(port, '127.0.0.1', () => {
				upstream.write(`${method} ${path} HTTP/1.0\r\n${kept.join('\r\n')}\r\nConnection: close\r\n\r\n`)
				upstream.write(rest)
			})
			upstream.on('data', (x) => {
				if (client.destroyed || client.writableEnded) upstream.destroy()
				else client.write(x)
			})
			upstream.on('end', () => client.end())
			upstream.on('error', () => client.destroy())
		})
		client.on('error', () => {}) // (noticed at the next write, as said above)
	})
	return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

const hasPy = async (sbx, mod) =>
	(await sbx.runCode(`import importlib.util\nimportlib.util.find_spec('${mod}') is not None`)).text === 'True'

async function scenario(url, label) {
	const sbx = new Sandbox({ sandboxId: 'code-kernel', sandboxUrl: url, envdVersion: '0.6.13', apiKey: 'x' })
	step(`${label}: state between runs`)
	await sbx.runCode('x = 1')
	let ex = await sbx.runCode('x+=1; x')
	assert.equal(ex.text, '2')
	assert.ok(ex.executionCount >= 2)

	step(`${label}: onStdout while the code runs`)
	const seen = []
	const t0 = Date.now()
	ex = await sbx.runCode("import time\nprint('one')\ntime.sleep(1)\nprint('two')", {
		onStdout: (m) => seen.push([m.line, Date.now() - t0]),
	})
	assert.deepEqual(seen.map((s) => s[0]), ['one\n', 'two\n'])
	assert.ok(seen[0][1] < 700, `the first line came after ${seen[0][1]} ms`)
	assert.deepEqual(ex.logs.stdout, ['one\n', 'two\n'])

	step(`${label}: stderr and errors`)
	ex = await sbx.runCode("import sys\nprint('e', file=sys.stderr)\n1/0")
	assert.deepEqual(ex.logs.stderr, ['e\n'])
	assert.equal(ex.error.name, 'ZeroDivisionError')
	assert.equal(ex.error.value, 'division by zero')
	assert.match(ex.error.traceback, /Cell In\[\d+\], line 3/)
	let errs = 0
	await sbx.runCode('undefined_name', { onError: () => errs++ })
	assert.equal(errs, 1)

	step(`${label}: envs`)
	ex = await sbx.runCode("import os\nos.environ.get('SDK_VAR')", { envs: { SDK_VAR: 'v' } })
	assert.equal(ex.text, "'v'")
	assert.equal((await sbx.runCode("os.environ.get('SDK_VAR')")).results.length, 0)

	step(`${label}: display and representations`)
	ex = await sbx.runCode(
		"class H:\n    def _repr_html_(self):\n        return '<i>h</i>'\n    def __repr__(self):\n        return 'H'\n" +
			"display(H())\n42")
	assert.equal(ex.results.length, 2)
	assert.equal(ex.results[0].isMainResult, false)
	assert.equal(ex.results[0].html, '<i>h</i>')
	assert.deepEqual(ex.results[0].formats(), ['html'])
	assert.equal(ex.results[1].isMainResult, true)
	assert.equal(ex.text, '42')

	step(`${label}: contexts`)
	const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
	assert.equal(ctx.cwd, '/tmp')
	assert.equal(ctx.language, 'python')
	assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
	await sbx.runCode('k = 3', { context: ctx })
	assert.equal((await sbx.runCode('k * 2', { context: ctx })).text, '6')
	assert.equal((await sbx.runCode('import os; os.getcwd()', { context: ctx })).text, "'/tmp'")
	assert.equal((await sbx.runCode('k')).error.name, 'NameError')
	await sbx.restartCodeContext(ctx)
	assert.equal((await sbx.runCode('k', { context: ctx })).error.name, 'NameError')
	await sbx.removeCodeContext(ctx.id)
	assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
	await assert.rejects(sbx.runCode('1', { context: ctx }), (e) => e instanceof NotFoundError)
	await assert.rejects(sbx.runCode('1', { language: 'r' }), (e) => e instanceof SandboxError && /400/.test(e.message))

	step(`${label}: an execution timeout interrupts the code, the context lives`)
	await sbx.runCode('kept = 9')
	await assert.rejects(sbx.runCode('while True:\n    pass', { timeoutMs: 1000 }), (e) => e instanceof TimeoutError)
	const t1 = Date.now()
	assert.equal((await sbx.runCode('kept + 1')).text, '10')
	assert.ok(Date.now() - t1 < 4000)

	step(`${label}: a crash, then a fresh process`)
	ex = await sbx.runCode('import os\nos._exit(3)')
	assert.match(ex.error.value, /status 3/)
	assert.equal((await sbx.runCode('1 + 1')).text, '2')

	if (await hasPy(sbx, 'matplotlib')) {
		step(`${label}: a matplotlib chart`)
		ex = await sbx.runCode(
			"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9], label='sq')\nplt.title('Squares')\nplt.show()")
		assert.equal(ex.results.length, 1)
		const r = ex.results[0]
		assert.ok(r.png && Buffer.from(r.png, 'base64').subarray(1, 4).toString() === 'PNG')
		assert.equal(r.chart.type, 'line')
		assert.equal(r.chart.title, 'Squares')
		assert.deepEqual(r.chart.elements[0].points, [[1, 1], [2, 4], [3, 9]])
		assert.ok(r.formats().includes('png'))
	} else step(`${label}: no matplotlib in this Python; chart check skipped`)
	if (await hasPy(sbx, 'pandas')) {
		step(`${label}: a DataFrame`)
		ex = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3.5, None]})")
		assert.match(ex.results[0].html, /<table/)
		assert.deepEqual(ex.results[0].data, { a: [1, 2], b: [3.5, null] })
	} else step(`${label}: no pandas in this Python; DataFrame check skipped`)
}

const { proc, port } = await startKernel()
let relay
try {
	await scenario(`http://127.0.0.1:${port}`, 'direct')
	relay = await startRelay(port)
	await scenario(`http://127.0.0.1:${relay.address().port}`, 'HTTP/1.0 relay')
	console.log('code_kernel_sdk: PASS')
} finally {
	if (relay) relay.close()
	proc.kill('SIGTERM')
}
process.exit(0) // the SDK's request timers would hold the process for another minute
