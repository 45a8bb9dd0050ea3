// The real @e2b/code-interpreter SDK against `space serve` (env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY):
// its default template, state between calls, streamed output, results of every kind the SDK reads (text,
// HTML, JSON, PNG, chart, DataFrame data), errors, contexts, languages, per-call environment variables
// and timeouts; and the sandbox's port needing its access token.
import { Sandbox } from '@e2b/code-interpreter'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import http from 'node:http'

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

// Ports: servers started inside by code (a Python http.server and a WebSocket echo, in a context of their
// own), reached through space serve by header routing, by Host routing (getHost) and as a WebSocket.
const serve = new URL(process.env.E2B_SANDBOX_URL)
const token = sbx.trafficAccessToken
const get = (headers) => new Promise((resolve, reject) => {
	const req = http.request({ host: serve.hostname, port: serve.port, path: '/hello.txt', headers }, (res) => {
		let body = ''
		res.on('data', (d) => { body += d })
		res.on('end', () => resolve([res.statusCode, body]))
	})
	req.on('error', reject)
	req.end()
})
const servers = await sbx.createCodeContext()
await check('servers started by code', async () => {
	const e = await sbx.runCode(`
import base64, hashlib, http.server, os, socket, struct, threading
os.makedirs('/srv', exist_ok=True)
open('/srv/hello.txt', 'w').write('hello from python\\n')
class Files(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k): super().__init__(*a, directory='/srv', **k)
    def log_message(self, *a): pass
files = http.server.ThreadingHTTPServer(('127.0.0.1', 8000), Files)
threading.Thread(target=files.serve_forever, daemon=True).start()
def ws_conn(c):
    f = c.makefile('rb')
    key = ''
    while True:
        line = f.readline().decode()
        if line in ('\\r\\n', ''): break
        if line.lower().startswith('sec-websocket-key:'): key = line.split(':', 1)[1].strip()
    accept = base64.b64encode(hashlib.sha1((key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').encode()).digest()).decode()
    c.sendall(('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n'
               'Sec-WebSocket-Accept: %s\\r\\n\\r\\n' % accept).encode())
    while True:
        h = f.read(2)
        if len(h) < 2: break
        op, n = h[0] & 15, h[1] & 127
        mask = f.read(4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(f.read(n)))
        if op == 8: break
        c.sendall(bytes([0x80 | op, len(data)]) + data)
    c.close()
def ws_serve(ls):
    while True:
        c, _ = ls.accept()
        threading.Thread(target=ws_conn, args=(c,), daemon=True).start()
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', 8001))
ls.listen()
threading.Thread(target=ws_serve, args=(ls,), daemon=True).start()
"listening"`, { context: servers })
	assert.equal(e.error, undefined, JSON.stringify(e.error))
	assert.equal(e.text, "'listening'")
})

await check('a Python http.server by header routing', async () => {
	const [status, body] = await get({ 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000', 'X-Access-Token': token })
	assert.equal(status, 200)
	assert.equal(body, 'hello from python\n')
	const [denied] = await get({ 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' })
	assert.equal(denied, 401)
})

await check('getHost and Host routing', async () => {
	const host = sbx.getHost(8000)
	assert.equal(host, `8000-${sbx.sandboxId}.${process.env.SPACE_TEST_DOMAIN}`)
	const [status, body] = await get({ Host: host, 'X-Access-Token': token })
	assert.equal(status, 200)
	assert.equal(body, 'hello from python\n')
})

await check('a WebSocket echo', async () => {
	const key = crypto.randomBytes(16).toString('base64')
	const want = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
	const echoed = await new Promise((resolve, reject) => {
		const req = http.request({ host: serve.hostname, port: serve.port, path: '/', headers: {
			Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Version': '13',
			'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8001', 'X-Access-Token': token } })
		req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)))
		req.on('error', reject)
		req.on('upgrade', (res, socket, head) => {
			if (res.headers['sec-websocket-accept'] !== want) return reject(new Error('bad Sec-WebSocket-Accept'))
			const text = Buffer.from('ping over a websocket')
			const mask = crypto.randomBytes(4)
			const frame = Buffer.concat([Buffer.from([0x81, 0x80 | text.length]), mask,
				Buffer.from(text.map((b, i) => b ^ mask[i % 4]))])
			let got = head
			socket.on('data', (d) => {
				got = Buffer.concat([got, d])
				if (got.length >= 2 && got.length >= 2 + (got[1] & 127)) {
					socket.end(Buffer.from([0x88, 0x80, 0, 0, 0, 0]))
					resolve([got[0], got.subarray(2, 2 + (got[1] & 127)).toString()])
				}
			})
			socket.write(frame)
		})
		req.end()
	})
	assert.deepEqual(echoed, [0x81, 'ping over a websocket'])
})
await sbx.removeCodeContext(servers)

await sbx.kill()
console.log(`code_interpreter_sdk: ${checks} checks passed`)
