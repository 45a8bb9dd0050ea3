// The real E2B JS SDK against one host of a `space serve` cluster (run by cluster.sh inside that host's
// network namespace; env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY). argv[2]: the id of a sandbox the
// cluster placed on another host; argv[3]: the text to leave in its /tmp/cluster.txt (cluster.sh then reads
// it on the owning host itself). Every call goes to this host and must reach the owner.
import { Sandbox } from 'e2b'
import assert from 'node:assert/strict'

const [id, text] = process.argv.slice(2)
let passed = 0
const ok = (what) => { passed++; console.log('cluster_e2b: ok ' + what) }

const sbx = await Sandbox.connect(id, { timeoutMs: 600_000 })
assert.equal(sbx.sandboxId, id)
ok('Sandbox.connect to a sandbox of another host')

const r = await sbx.commands.run('echo hi')
assert.equal(r.stdout, 'hi\n')
assert.equal(r.exitCode, 0)
ok('commands.run echo hi')

await sbx.files.write('/tmp/cluster.txt', text)
assert.equal(await sbx.files.read('/tmp/cluster.txt'), text)
ok('files.write / files.read round trip')

assert.equal((await sbx.commands.run('cat /tmp/cluster.txt')).stdout, text)
ok('a command sees the file written')

assert.equal(await sbx.isRunning(), true)
ok('isRunning')

// A sandbox created through the SDK on this host, wherever the cluster places it, works and goes.
const fresh = await Sandbox.create('base', { timeoutMs: 600_000 })
assert.match(fresh.sandboxId, /^sb-/)
console.log('cluster_e2b: created ' + fresh.sandboxId)
assert.equal((await fresh.commands.run('echo fresh')).stdout, 'fresh\n')
ok('Sandbox.create and commands.run on the new sandbox')
await fresh.kill()
await assert.rejects(Sandbox.connect(fresh.sandboxId), (e) => /NotFound/.test(e.name))
ok('kill: the new sandbox is gone')

console.log(`cluster_e2b: ${passed} checks passed`)
