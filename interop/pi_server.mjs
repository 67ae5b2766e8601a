// What the published Pi computes, as JSON, for the interop tests.
//
// One long-running process: each line on stdin is a JSON request, each line
// on stdout the JSON answer ({"ok": …} or {"error": …}). Requests:
//
//   {"op": "read", "file": PATH, "leaves": [ID|null…] | "all", "keep": [N…],
//    "branch_pairs": [[OLD, TARGET]…]}
//     Opens the file with SessionManager.open and reports what Pi sees: the
//     header and entries (after Pi's own migration), the default leaf, the
//     session name, labels, the tree, and per leaf the LLM context and, per
//     keepRecentTokens value, the compaction preparation; per pair the
//     branch-summary collection.
//   {"op": "write", "dir": DIR, "cwd": CWD, "ops": [...]}
//     Writes a session with SessionManager's public API (see runOps).
//   {"op": "open", "file": PATH}
//     Opens a file and reports whether Pi accepts it (nothing else).
//   {"op": "estimate", "messages": [...]}
//     Pi's token estimate (compaction's estimateTokens) of each message.
//   {"op": "stringify", "values": [...]}
//     JSON.stringify of each value, as Pi serializes tool-call arguments.
//
// Only Pi's own modules are used; nothing here re-implements its rules.

import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";

const base = "./node_modules/@earendil-works/pi-coding-agent/dist/core";
const sessions = await import(`${base}/session-manager.js`);
const compaction = await import(`${base}/compaction/compaction.js`);
const branchSummaries = await import(`${base}/compaction/branch-summarization.js`);
const summaryUtils = await import(`${base}/compaction/utils.js`);
const messages = await import(`${base}/messages.js`);
const { SessionManager, buildSessionContext } = sessions;

function fileOpsJson(fileOps) {
	return {
		read: [...fileOps.read].sort(),
		written: [...fileOps.written].sort(),
		edited: [...fileOps.edited].sort(),
	};
}

function preparationJson(prep) {
	if (!prep) return null;
	return {
		firstKeptEntryId: prep.firstKeptEntryId,
		messagesToSummarize: prep.messagesToSummarize,
		turnPrefixMessages: prep.turnPrefixMessages,
		isSplitTurn: prep.isSplitTurn,
		tokensBefore: prep.tokensBefore,
		previousSummary: prep.previousSummary ?? null,
		fileOps: fileOpsJson(prep.fileOps),
		details: summaryUtils.computeFileLists(prep.fileOps),
		serialized: summaryUtils.serializeConversation(messages.convertToLlm(prep.messagesToSummarize)),
		serializedPrefix: summaryUtils.serializeConversation(messages.convertToLlm(prep.turnPrefixMessages)),
	};
}

function treeJson(nodes) {
	return nodes.map((node) => ({ id: node.entry.id, label: node.label ?? null, children: treeJson(node.children) }));
}

function read(request) {
	const sm = SessionManager.open(request.file);
	const entries = sm.getEntries();
	const byId = new Map(entries.map((entry) => [entry.id, entry]));
	const labels = {};
	for (const entry of entries) {
		const label = sm.getLabel(entry.id);
		if (label !== undefined) labels[entry.id] = label;
	}
	const leaves = request.leaves === "all" ? [null, ...entries.map((entry) => entry.id)] : (request.leaves ?? []);
	const contexts = [];
	const preparations = [];
	for (const leaf of leaves) {
		contexts.push(buildSessionContext(entries, leaf, byId));
		const branch = leaf === null ? [] : sm.getBranch(leaf);
		preparations.push(
			(request.keep ?? []).map((keepRecentTokens) =>
				preparationJson(
					compaction.prepareCompaction(branch, { enabled: true, reserveTokens: 16384, keepRecentTokens }),
				),
			),
		);
	}
	const branchSummaryCollections = (request.branch_pairs ?? []).map(([oldLeaf, target]) => {
		const { entries: collected, commonAncestorId } = branchSummaries.collectEntriesForBranchSummary(
			sm,
			oldLeaf,
			target,
		);
		const prepared = branchSummaries.prepareBranchEntries(collected, request.branch_budget ?? 0);
		return {
			entries: collected.map((entry) => entry.id),
			commonAncestorId,
			messages: prepared.messages,
			fileOps: fileOpsJson(prepared.fileOps),
			totalTokens: prepared.totalTokens,
		};
	});
	return {
		header: sm.getHeader(),
		entries,
		leaf: sm.getLeafId(),
		name: sm.getSessionName() ?? null,
		labels,
		tree: treeJson(sm.getTree()),
		leaves,
		contexts,
		preparations,
		branchSummaries: branchSummaryCollections,
	};
}

// Write ops: "$name" in a reference field names an entry recorded earlier
// with "ref": "name".
function runOps(request) {
	const sm = SessionManager.create(request.cwd ?? request.dir, request.dir);
	const refs = {};
	const files = [];
	const at = (value) => (typeof value === "string" && value.startsWith("$") ? refs[value.slice(1)] : value);
	const record = (op, id) => {
		if (op.ref) refs[op.ref] = id;
	};
	for (const op of request.ops) {
		switch (op.op) {
			case "message":
				record(op, sm.appendMessage(op.message));
				break;
			case "thinking":
				record(op, sm.appendThinkingLevelChange(op.level));
				break;
			case "model":
				record(op, sm.appendModelChange(op.provider, op.modelId));
				break;
			case "custom":
				record(op, sm.appendCustomEntry(op.customType, op.data));
				break;
			case "custom_message":
				record(op, sm.appendCustomMessageEntry(op.customType, op.content, op.display, op.details));
				break;
			case "label":
				record(op, sm.appendLabelChange(at(op.target), op.label ?? undefined));
				break;
			case "name":
				record(op, sm.appendSessionInfo(op.name));
				break;
			case "usage":
				record(op, sm.appendUsage(op.kind, op.provider, op.model, op.usage, op.note).id);
				break;
			case "context_edit":
				record(op, sm.appendContextEdit(at(op.target), op.replacement));
				break;
			case "branch":
				sm.branch(at(op.to));
				break;
			case "reset":
				sm.resetLeaf();
				break;
			case "branch_with_summary":
				record(op, sm.branchWithSummary(at(op.to), op.summary, op.details));
				break;
			case "compact": {
				// The cut Pi's own prepareCompaction chooses, as /compact does.
				const settings = { enabled: true, reserveTokens: 16384, keepRecentTokens: op.keepRecentTokens };
				const prep = compaction.prepareCompaction(sm.getBranch(), settings);
				if (!prep) {
					record(op, null);
					break;
				}
				const details = summaryUtils.computeFileLists(prep.fileOps);
				const summary =
					op.summary + summaryUtils.formatFileOperations(details.readFiles, details.modifiedFiles);
				record(op, sm.appendCompaction(summary, prep.firstKeptEntryId, prep.tokensBefore, details));
				break;
			}
			case "compact_none":
				record(op, sm.appendCompaction(op.summary, null, op.tokensBefore ?? 0, undefined, undefined, op.usage));
				break;
			case "fork": {
				const before = sm.getSessionFile();
				if (!files.includes(before)) files.push(before);
				files.push(sm.createBranchedSession(at(op.at)));
				break;
			}
			default:
				throw new Error(`unknown write op ${op.op}`);
		}
	}
	const last = sm.getSessionFile();
	if (!files.includes(last)) files.push(last);
	return { files, refs, file: last };
}

function open(request) {
	try {
		const sm = SessionManager.open(request.file);
		return { accepted: true, entries: sm.getEntries().length, bytes: readFileSync(request.file).length };
	} catch (error) {
		return { accepted: false, error: String(error.message ?? error) };
	}
}

// Pi's session list of a folder (what its /resume picker shows): id, file,
// name and the parent session file each session names.
async function list(request) {
	const infos = await SessionManager.list(request.cwd, request.dir);
	return infos.map((info) => ({
		id: info.id,
		path: info.path,
		name: info.name ?? null,
		parentSessionPath: info.parentSessionPath ?? null,
		messageCount: info.messageCount,
	}));
}

function estimate(request) {
	return request.messages.map((message) => compaction.estimateTokens(message));
}

function stringify(request) {
	return request.values.map((value) => JSON.stringify(value));
}

const handlers = { read, write: runOps, open, list, estimate, stringify };

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
	if (!line.trim()) continue;
	let answer;
	try {
		const request = JSON.parse(line);
		const handler = handlers[request.op];
		if (!handler) throw new Error(`unknown op ${request.op}`);
		answer = { ok: await handler(request) };
	} catch (error) {
		answer = { error: String(error?.stack ?? error) };
	}
	process.stdout.write(`${JSON.stringify(answer)}\n`);
}
