// The real E2B JS SDK against `space serve` (env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY).
import { Sandbox, CommandExitError } from 'e2b'
import assert from 'node:assert/strict'

const step = (s) => console.log('e2b_sdk: ' + s)

step('create')
const sbx = await Sandbox.create({ envs: { GREETING: 'hello-env' }, metadata: { owner: 'test' }, timeoutMs: 600_000 })
assert.match(sbx.sandboxId, /^sb-/)

step('commands.run')
const r = await sbx.commands.run('echo hi; echo err >&2')
assert.equal(r.stdout, 'hi\n')
assert.equal(r.stderr, 'err\n')
assert.equal(r.exitCode, 0)

step('exit code')
await assert.rejects(sbx.commands.run('exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3)

step('envs')
assert.equal((await sbx.commands.run('echo $GREETING $X', { envs: { X: 'per-command' } })).stdout,
	'hello-env per-command\n')
assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n')

step('output as it comes')
const chunks = []
await sbx.commands.run('for i in 1 2 3; do echo line$i; done', { onStdout: (d) => chunks.push(d) })
assert.equal(chunks.join(''), 'line1\nline2\nline3\n')

step('files.write / read')
const info = await sbx.files.write('/tmp/e2b/a.txt', 'x')
assert.equal(info.path, '/tmp/e2b/a.txt')
assert.equal(await sbx.files.read('/tmp/e2b/a.txt'), 'x')
const bin = new Uint8Array(300000).map((_, i) => (i * 7) & 255)
await sbx.files.write('/tmp/e2b/bin', bin.buffer)
assert.deepEqual(new Uint8Array(await sbx.files.read('/tmp/e2b/bin', { format: 'bytes' })), bin)
await sbx.files.write([{ path: '/tmp/e2b/m1', data: 'one' }, { path: '/tmp/e2b/m2', data: 'two' }])
assert.equal(await sbx.files.read('/tmp/e2b/m2'), 'two')
assert.equal((await sbx.commands.run('cat /tmp/e2b/a.txt')).stdout, 'x')
await sbx.files.write('/tmp/e2b/empty', '')
assert.equal(await sbx.files.read('/tmp/e2b/empty'), '')

step('files.list / exists / makeDir / rename / remove / getInfo')
const names = (await sbx.files.list('/tmp/e2b')).map((e) => e.name).sort()
assert.deepEqual(names, ['a.txt', 'bin', 'empty', 'm1', 'm2'])
assert.equal(await sbx.files.exists('/tmp/e2b/a.txt'), true)
assert.equal(await sbx.files.exists('/tmp/e2b/nope'), false)
assert.equal(await sbx.files.makeDir('/tmp/e2b/d/e'), true)
assert.equal(await sbx.files.makeDir('/tmp/e2b/d/e'), false)
const moved = await sbx.files.rename('/tmp/e2b/m1', '/tmp/e2b/d/m1')
assert.equal(moved.path, '/tmp/e2b/d/m1')
const fi = await sbx.files.getInfo('/tmp/e2b/bin')
assert.equal(fi.size, 300000)
assert.equal(fi.type, 'file')
await sbx.files.remove('/tmp/e2b/d')
assert.equal(await sbx.files.exists('/tmp/e2b/d'), false)
await assert.rejects(sbx.files.read('/tmp/e2b/nope'), (e) => /NotFound/.test(e.name))

step('background command, list, stdin, kill')
const h = await sbx.commands.run('cat', { background: true, stdin: true })
const listed = await sbx.commands.list()
assert.ok(listed.some((p) => p.pid === h.pid))
await sbx.commands.sendStdin(h.pid, 'hello stdin\n')
await sbx.commands.closeStdin(h.pid)
const hr = await h.wait()
assert.equal(hr.stdout, 'hello stdin\n')
const sl = await sbx.commands.run('sleep 100', { background: true })
assert.equal(await sbx.commands.kill(sl.pid), true)
await assert.rejects(sl.wait())
assert.equal(await sbx.commands.kill(999999), false)

step('pty')
const dec = new TextDecoder()
let ptyOut = ''
const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { ptyOut += dec.decode(d) } })
await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo pty-$((6*7)); exit 5\n'))
await assert.rejects(term.wait(), (e) => e instanceof CommandExitError && e.exitCode === 5)
assert.match(ptyOut, /pty-42/)

step('command timeout')
await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1000 }))

step('isRunning / getInfo / list / connect')
assert.equal(await sbx.isRunning(), true)
const det = await sbx.getInfo()
assert.equal(det.sandboxId, sbx.sandboxId)
assert.equal(det.templateId, 'base')
assert.deepEqual(det.metadata, { owner: 'test' })
const page = await Sandbox.list().nextItems()
assert.ok(page.some((s) => s.sandboxId === sbx.sandboxId))
const other = await Sandbox.create()
const pager = Sandbox.list({ limit: 1 })
const seen = []
while (pager.hasNext) seen.push(...(await pager.nextItems()).map((s) => s.sandboxId))
assert.deepEqual(seen.sort(), [sbx.sandboxId, other.sandboxId].sort())
await other.kill()
const again = await Sandbox.connect(sbx.sandboxId)
assert.equal((await again.commands.run('echo again')).stdout, 'again\n')

step('kill')
await sbx.kill()  // true from 2.x versions that return it
assert.equal(await Sandbox.kill(sbx.sandboxId), false)
await assert.rejects(Sandbox.connect(sbx.sandboxId), (e) => /NotFound/.test(e.name))

step('PASS')
