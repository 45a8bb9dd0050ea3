// The real E2B JS SDK against `space serve`: files.watchDir (events found by polling: create, write,
// remove, rename, recursive or not, stop) and getMetrics (CPU, memory and disk figures that move)
// (env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY). Prints "e2b_sdk_watch: N checks passed" at the end.
import { Sandbox, FilesystemEventType, FileNotFoundError } from 'e2b'
import assert from 'node:assert/strict'

const step = (s) => console.log('e2b_sdk_watch: ' + s)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
let checks = 0
const check = (ok, what) => {
	assert.ok(ok, what)
	checks++
}
// Waits (up to ms) until pred holds on the events seen so far.
const waitFor = async (events, pred, ms = 5_000) => {
	for (let t = 0; t < ms; t += 50) {
		if (events.some(pred)) return true
		await sleep(50)
	}
	return false
}
const has = (type, name) => (e) => e.type === type && e.name === name

const sbx = await Sandbox.create({ timeoutMs: 600_000 })

step('watchDir: files.write, a command, a removal, a rename')
await sbx.files.makeDir('/root/w/sub')
const events = []
let exited = null
const handle = await sbx.files.watchDir('/root/w', (e) => events.push(e), {
	onExit: (err) => { exited = err ?? 'clean' },
})
await sbx.files.write('/root/w/a.txt', 'hello')
check(await waitFor(events, has(FilesystemEventType.CREATE, 'a.txt')), 'create of a file written by files.write')
check(await waitFor(events, has(FilesystemEventType.WRITE, 'a.txt')), 'write of a file written by files.write')
await sbx.commands.run('echo made-by-a-command > /root/w/b.txt')
check(await waitFor(events, has(FilesystemEventType.CREATE, 'b.txt')), 'create of a file made by a command')
await sbx.commands.run('sleep 0.3; echo more >> /root/w/b.txt')
check(await waitFor(events, (e) => e.type === FilesystemEventType.WRITE && e.name === 'b.txt' &&
	events.filter(has(FilesystemEventType.WRITE, 'b.txt')).length >= 2), 'write of an appended file')
await sbx.commands.run('chmod 600 /root/w/b.txt')
check(await waitFor(events, has(FilesystemEventType.CHMOD, 'b.txt')), 'chmod')
await sbx.files.remove('/root/w/a.txt')
check(await waitFor(events, has(FilesystemEventType.REMOVE, 'a.txt')), 'remove')
await sbx.commands.run('mv /root/w/b.txt /root/w/c.txt')
check(await waitFor(events, has(FilesystemEventType.RENAME, 'b.txt')), 'rename of the old name')
check(await waitFor(events, has(FilesystemEventType.CREATE, 'c.txt')), 'create of the new name')

step('watchDir: not recursive')
await sbx.commands.run('echo deep > /root/w/sub/deep.txt')
await sleep(800)
check(!events.some((e) => e.name.includes('deep')), 'a file in a subdirectory is not seen without recursive')
check(exited === null, 'the watch is still on')

step('watchDir: stop')
await handle.stop()
await sleep(300)
const before = events.length
await sbx.files.write('/root/w/after-stop.txt', 'x')
await sleep(800)
check(events.length === before, 'no event after stop')

step('watchDir: recursive')
const rev = []
const rh = await sbx.files.watchDir('/root/w', (e) => rev.push(e), { recursive: true })
await sbx.commands.run('mkdir -p /root/w/sub/two && echo x > /root/w/sub/two/r.txt')
check(await waitFor(rev, has(FilesystemEventType.CREATE, 'sub/two')), 'recursive: a new directory below')
check(await waitFor(rev, has(FilesystemEventType.CREATE, 'sub/two/r.txt')), 'recursive: a file two levels below')
await sbx.commands.run('rm -r /root/w/sub/two')
check(await waitFor(rev, has(FilesystemEventType.REMOVE, 'sub/two/r.txt')), 'recursive: removal below')
await rh.stop()

step('watchDir: errors')
await sbx.files.write('/root/plain.txt', 'x')
await assert.rejects(sbx.files.watchDir('/root/missing', () => {}), (e) => e instanceof FileNotFoundError)
checks++
await assert.rejects(sbx.files.watchDir('/root/plain.txt', () => {}), (e) => /directory/.test(e.message))
checks++

step('watchDir: the watch ends when the directory goes')
let gone = null
await sbx.files.makeDir('/root/doomed')
await sbx.files.watchDir('/root/doomed', () => {}, { onExit: (err) => { gone = err ?? 'clean' } })
await sbx.files.remove('/root/doomed')
for (let i = 0; i < 100 && gone === null; i++) await sleep(50)
check(gone !== null, 'onExit is called when the watched directory is removed')

step('watchDir: the watch ends, saying so, when the sandbox is paused')
const p = await Sandbox.create({ timeoutMs: 600_000 })
let pausedExit = null
await p.files.watchDir('/root', () => {}, { onExit: (err) => { pausedExit = err ?? 'clean' } })
assert.equal(await (p.pause ? p.pause() : p.betaPause()), true)
for (let i = 0; i < 100 && pausedExit === null; i++) await sleep(50)
check(pausedExit instanceof Error && /paused/.test(pausedExit.message), `onExit says the sandbox was paused (${pausedExit})`)
await p.kill()

step('getMetrics')
const info = await sbx.getInfo()
const last = async () => {
	const m = await sbx.getMetrics()
	assert.ok(Array.isArray(m) && m.length >= 1, 'getMetrics returns entries')
	return m[m.length - 1]
}
const m0 = await last()
check(m0.cpuCount === info.cpuCount && m0.cpuCount >= 1, `cpuCount is the sandbox's (${m0.cpuCount})`)
check(m0.memTotal === info.memoryMB * 1024 * 1024, `memTotal is the sandbox's memory (${m0.memTotal})`)
check(m0.memUsed > 0 && m0.memUsed <= m0.memTotal, `memUsed (${m0.memUsed})`)
check(m0.diskTotal > 0 && m0.diskUsed > 0 && m0.diskUsed <= m0.diskTotal, `disk (${m0.diskUsed}/${m0.diskTotal})`)
check(m0.timestamp instanceof Date && Math.abs(m0.timestamp.getTime() - Date.now()) < 60_000, 'timestamp')
check(typeof m0.cpuUsedPct === 'number' && m0.cpuUsedPct >= 0 && m0.cpuUsedPct <= 100, `cpuUsedPct (${m0.cpuUsedPct})`)
await sbx.commands.run('dd if=/dev/zero of=/dev/shm/hog bs=1M count=32')
const m1 = await last()
check(m1.memUsed >= m0.memUsed + 24 * 1024 * 1024, `memUsed grows after 32 MiB in /dev/shm (${m0.memUsed} -> ${m1.memUsed})`)
await sbx.commands.run('dd if=/dev/urandom of=/root/big bs=1M count=20 && sync')
const m2 = await last()
check(m2.diskUsed >= m1.diskUsed + 16 * 1024 * 1024, `diskUsed grows after a 20 MiB file (${m1.diskUsed} -> ${m2.diskUsed})`)
// A loop that runs for a set time (a count of iterations can end before the read on a fast machine), read
// halfway: the read's window (since the sample before it, at most 5 s back) holds at least 2 s of it.
const busy = sbx.commands.run("timeout 4 sh -c 'while :; do :; done'; true")
await sleep(2_500)
const m3 = await last()
await busy
check(m3.cpuUsedPct > 10, `cpuUsedPct while a loop runs (${m3.cpuUsedPct})`)
const all = await sbx.getMetrics({ start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() + 60_000) })
check(all.length >= 2 && all.every((m, i) => i === 0 || m.timestamp >= all[i - 1].timestamp), 'a series, oldest first')
const none = await Sandbox.getMetrics(sbx.sandboxId, { start: new Date(Date.now() - 7_200_000), end: new Date(Date.now() - 3_600_000) })
check(none.length === 0, 'nothing before the sandbox existed')

step('watchDir: the watch ends when the sandbox is killed; getMetrics then finds none')
let killedExit = null
await sbx.files.watchDir('/root', () => {}, { onExit: (err) => { killedExit = err ?? 'clean' } })
await sbx.kill()
for (let i = 0; i < 100 && killedExit === null; i++) await sleep(50)
check(killedExit !== null, `onExit is called when the sandbox is killed (${killedExit})`)
await assert.rejects(Sandbox.getMetrics(sbx.sandboxId), (e) => /NotFound/.test(e.name))
checks++
step(`${checks} checks passed`)
