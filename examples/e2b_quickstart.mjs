// Code written for E2B runs against `space serve` unchanged: only the environment differs.
//
//   space apikey create --name e2b          # prints the key
//   space serve &                           # 127.0.0.1:8080, native /v1 API and the E2B API
//   export E2B_API_KEY=<that key>
//   export E2B_API_URL=http://127.0.0.1:8080       # the two variables that move E2B code to libspace
//   export E2B_SANDBOX_URL=http://127.0.0.1:8080
//   npm install e2b && node e2b_quickstart.mjs
import { Sandbox } from 'e2b'

const sandbox = await Sandbox.create()            // the "base" template
try {
  const r = await sandbox.commands.run('echo hello from $(uname -s)')
  console.log(r.stdout.trim())                    // hello from Linux
  await sandbox.files.write('/tmp/note.txt', 'written through the E2B SDK')
  console.log(await sandbox.files.read('/tmp/note.txt'))
  if (r.exitCode !== 0 || !r.stdout.includes('hello from Linux')) process.exit(1)
} finally {
  await sandbox.kill()
}
