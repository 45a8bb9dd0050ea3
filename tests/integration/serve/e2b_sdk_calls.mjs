// The real E2B JS SDK against `space serve`: processes that outlive their stream (background commands,
// commands.connect, a dropped stream), pty.resize, the `user` option of commands and files, the cap on
// processes per sandbox. Env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
import { Sandbox, CommandExitError } from 'e2b'
import assert from 'node:assert/strict'

let checks = 0
const step = (s) => console.log('e2b_sdk_calls: ' + s)
const passed = () => { checks++ }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const sbx = await Sandbox.create({ timeoutMs: 600_000 })

step('background command: disconnected, listed, reached again by commands.connect')
{
	const bg = await sbx.commands.run('sleep 3; echo later-out; echo later-err >&2; exit 7', { background: true })
	await bg.disconnect()
	const listed = await sbx.commands.list()
	assert.ok(listed.some((p) => p.pid === bg.pid), 'the disconnected command is still listed')
	const out = []
	const again = await sbx.commands.connect(bg.pid, { onStdout: (d) => out.push(d) })
	assert.equal(again.pid, bg.pid)
	await assert.rejects(again.wait(), (e) => e instanceof CommandExitError && e.exitCode === 7 &&
		e.stdout === 'later-out\n' && e.stderr === 'later-err\n')
	assert.equal(out.join(''), 'later-out\n')
	assert.ok(!(await sbx.commands.list()).some((p) => p.pid === bg.pid), 'an ended command leaves the list')
	passed()
}

step('commands.connect to no such process')
await assert.rejects(sbx.commands.connect(999999), (e) => /NotFound/.test(e.name) || /not.?found/i.test(e.message))
passed()

step('a command whose stream is dropped finishes its work')
{
	const ac = new AbortController()
	const run = sbx.commands.run('sleep 2; echo done >/tmp/late.txt', { signal: ac.signal })
	await sleep(500)
	ac.abort()
	await assert.rejects(run)
	let content = null
	for (let i = 0; i < 100 && content === null; i++) {
		await sleep(200)
		if (await sbx.files.exists('/tmp/late.txt'))
			content = await sbx.files.read('/tmp/late.txt')
	}
	assert.equal(content, 'done\n', 'the command went on after its client left')
	passed()
}

step('pty.create, pty.resize, stty size')
{
	const dec = new TextDecoder()
	let out = ''
	const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) } })
	await sbx.pty.resize(term.pid, { cols: 123, rows: 45 })
	await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; exit 0\n'))
	await term.wait()
	assert.match(out, /^45 123\r?$/m, 'stty prints the new size')
	await assert.rejects(sbx.pty.resize(999999, { cols: 10, rows: 10 }))
	passed()
}

step('pty input sent at once is never lost (a shell asked `exit 5` right after it started)')
for (let i = 0; i < 5; i++) {
	const dec = new TextDecoder()
	let out = ''
	const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) }, timeoutMs: 20_000 })
	await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo pty-$((6*7)); exit 5\n'))
	await assert.rejects(term.wait(), (e) => e instanceof CommandExitError && e.exitCode === 5)
	assert.match(out, /pty-42/)
}
passed()

step('commands.run as a user')
{
	assert.equal((await sbx.commands.run('id -u; id -g; echo $HOME; pwd', { user: 'user' })).stdout,
		'1000\n1000\n/home/user\n/home/user\n')
	assert.equal((await sbx.commands.run('id -u', { user: 'root' })).stdout, '0\n')
	assert.equal((await sbx.commands.run('id -u; pwd', { user: 'user', cwd: '/tmp' })).stdout, '1000\n/tmp\n')
	passed()
}

step('an unknown user is refused with a clear error')
await assert.rejects(sbx.commands.run('id -u', { user: 'nosuchuser' }), (e) => /no user 'nosuchuser' in the sandbox/.test(e.message))
passed()

step('files.write / read as a user: relative paths in the user\'s home')
{
	const info = await sbx.files.write('x.txt', 'for user', { user: 'user' })
	assert.equal(info.path, '/home/user/x.txt')
	assert.equal((await sbx.commands.run('cat /home/user/x.txt')).stdout, 'for user')
	assert.equal(await sbx.files.read('x.txt', { user: 'user' }), 'for user')
	assert.equal(await sbx.files.exists('x.txt', { user: 'user' }), true)
	await assert.rejects(sbx.files.write('y.txt', 'no', { user: 'nosuchuser' }), (e) => /no user 'nosuchuser'/.test(e.message))
	passed()
}

step('at most 64 processes per sandbox')
{
	const cap = await Sandbox.create({ timeoutMs: 600_000 })
	const pids = []
	for (let i = 0; i < 64; i++) {
		const h = await cap.commands.run('sleep 300', { background: true })
		await h.disconnect()
		pids.push(h.pid)
	}
	assert.equal((await cap.commands.list()).length, 64)
	await assert.rejects(cap.commands.run('echo one too many'), (e) => /64 processes/.test(e.message))
	// Other sandboxes are not affected.
	assert.equal((await sbx.commands.run('echo fine')).stdout, 'fine\n')
	// One ends: room for another.
	assert.equal(await cap.commands.kill(pids[0]), true)
	let listed = 64
	for (let i = 0; i < 50 && listed === 64; i++) {
		await sleep(100)
		listed = (await cap.commands.list()).length
	}
	assert.equal(listed, 63)
	assert.equal((await cap.commands.run('echo room')).stdout, 'room\n')
	// Killing the sandbox ends its processes (their runners on the server too).
	await cap.kill()
	passed()
}

step("a background process left running for the server's stop (e2b_sdk.sh stops it)")
{
	const left = await sbx.commands.run('sleep 300', { background: true })
	assert.ok((await sbx.commands.list()).some((p) => p.pid === left.pid))
	await left.disconnect()
	passed()
}

console.log(`e2b_sdk_calls: ${checks} checks passed`)
