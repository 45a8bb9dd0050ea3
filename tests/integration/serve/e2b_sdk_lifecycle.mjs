// The real E2B JS SDK against `space serve`: lifetimes that change (setTimeout, both ways), pause, and
// resume through connect (env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY).
import { Sandbox } from 'e2b'
import assert from 'node:assert/strict'

const step = (s) => console.log('e2b_sdk_lifecycle: ' + s)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

step('setTimeout extends')
const sbx = await Sandbox.create({ timeoutMs: 3_000 })
await sbx.setTimeout(60_000)
assert.ok(new Date((await sbx.getInfo()).endAt).getTime() - Date.now() > 40_000)
await sleep(4_500)
assert.equal((await sbx.commands.run('echo alive')).stdout, 'alive\n')

step('setTimeout shortens')
await sbx.setTimeout(2_000)
await sleep(3_000)
let gone = false
for (let i = 0; i < 40 && !gone; i++) {         // the server reaps every 5 s
	gone = !(await sbx.isRunning())
	if (!gone) await sleep(250)
}
assert.ok(gone, 'the sandbox is gone after its shortened lifetime')
await assert.rejects(sbx.getInfo(), (e) => /NotFound/.test(e.name))

step('pause, then connect resumes')
const p = await Sandbox.create()
await p.files.write('/root/keep.txt', 'kept')
assert.equal(await (p.pause ? p.pause() : p.betaPause()), true)
assert.equal((await p.getInfo()).state, 'paused')
const resumed = await Sandbox.connect(p.sandboxId)
assert.equal((await resumed.getInfo()).state, 'running')
assert.equal(await resumed.files.read('/root/keep.txt'), 'kept')
assert.equal((await resumed.commands.run('echo resumed')).stdout, 'resumed\n')
await resumed.kill()

step('PASS')
