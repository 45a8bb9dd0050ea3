// E2B's code interpreter on libspace: the unchanged @e2b/code-interpreter SDK, pointed at `space serve`.
//   space serve --listen 127.0.0.1:8080 &          # with code-interpreter-v1 built (scripts/make-templates.sh)
//   export E2B_API_KEY=$(space apikey create) E2B_API_URL=http://127.0.0.1:8080 E2B_SANDBOX_URL=http://127.0.0.1:8080
//   npm install @e2b/code-interpreter && node code_interpreter.mjs
import { Sandbox } from '@e2b/code-interpreter'

const sbx = await Sandbox.create() // template code-interpreter-v1: its kernel is ready when this returns
try {
	await sbx.runCode('x = 1')
	const execution = await sbx.runCode('x + 1')
	console.log(`x + 1 = ${execution.text}`)

	const chart = await sbx.runCode(`
import matplotlib.pyplot as plt
plt.bar(["a", "b", "c"], [3, 1, 2])
plt.title("Votes")
plt.show()`)
	const png = chart.results.find((r) => r.png)
	console.log(`a ${png.chart.type} chart "${png.chart.title}" as a ${Buffer.from(png.png, 'base64').length}-byte PNG`)

	const failed = await sbx.runCode('1 / 0')
	console.log(`error: ${failed.error.name}: ${failed.error.value}`)
} finally {
	await sbx.kill()
}
