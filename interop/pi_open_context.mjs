// Benchmark worker: Pi 1.6.0 opening a session file and building the LLM
// context at its leaf, timed in-process (module loading excluded). Prints
// one JSON line: milliseconds, CPU milliseconds of the process (every
// thread: the garbage collector's helpers too), peak RSS of this process
// (KiB), message count.
const { SessionManager } = await import(
	"./node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js"
);
const file = process.argv[2];
const cpuBefore = process.cpuUsage();
const started = performance.now();
const session = SessionManager.open(file);
const context = session.buildSessionContext();
const elapsed = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
process.stdout.write(
	`${JSON.stringify({ ms: elapsed, cpu_ms: (cpu.user + cpu.system) / 1000, maxrss_kib: process.resourceUsage().maxRSS, messages: context.messages.length })}\n`,
);
