"""Which facts prompt does a small model follow best? Replays the facts prompts of a live
recording (`make bench-live`) against the same server in variants, and judges each answer's
claims with the memory bench's judge.

    python -m benchmarks.facts_prompt --record bench-results/live/live-model.jsonl \\
        --endpoint http://127.0.0.1:8088/v1 --variants as-sent,one-example,no-grammar

Variants (each a change to the prompt or the request the recording holds):
- `as-sent`: the prompt and request as recorded (two examples, the claims' JSON schema
  given to llama.cpp as a grammar through `response_format`);
- `one-example`: the second example left out;
- `no-grammar`: no `response_format` (the prompt alone holds the model to the format);
- `short`: the instructions cut to one line a field;
- `no-agent-bio`: the assistant listed among the actors without its description (the live
  model filed the character's description on a person).

For each variant: claims read, the share judged right (precision: grounded in what its subject
said, on a speaker, not a changed value, not planted; see benchmarks/memory_judge.py), the
expected current facts found among the claims of their subject (recall, counting only what
was said by the time of the prompt), answers that could not be read, and the prompt's words.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from benchmarks.memory import DEFAULT_DATA, Conversation, load_conversations
from benchmarks.memory_judge import FactJudge
from bot.llm.parsing import parse_json_object

VARIANTS = ("as-sent", "one-example", "no-grammar", "short", "no-agent-bio")
_SHORT_INSTRUCTIONS = """# INSTRUCTIONS
One claim per thing a person said about themselves, written with their name.
subject: that person's name from "Actors in the scene"; never the assistant.
type: "fact", "status" (true now, will change) or "opinion".
change: "new", or "update"/"retract"/"repeat" with fact set to the known fact's id.
in_bio: true if their description already says it.
"""


@dataclass
class Tally:
    calls: int = 0
    unreadable: int = 0
    claims: int = 0
    right: int = 0
    expected: int = 0
    found: int = 0
    words: int = 0
    seconds: float = 0.0
    wrong: list[str] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)

    def row(self, name: str) -> dict[str, Any]:
        return {
            "variant": name,
            "calls": self.calls,
            "unreadable": self.unreadable,
            "claims": self.claims,
            "precision": round(self.right / self.claims, 3) if self.claims else None,
            "recall": round(self.found / self.expected, 3) if self.expected else None,
            "prompt_words": round(self.words / max(self.calls, 1)),
            "seconds_per_call": round(self.seconds / max(self.calls, 1), 1),
            "wrong": self.wrong[:10],
            "answers": self.answers,
        }


def variant(name: str, prompt: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    params = {k: v for k, v in params.items() if k not in ("model", "stream")}
    if name == "one-example":
        prompt = re.sub(r"\n\nExample 2:.*?(?=\n# END OF EXAMPLES)", "", prompt, flags=re.S)
    elif name == "no-grammar":
        params.pop("response_format", None)
    elif name == "short":
        prompt = re.sub(
            r"# INSTRUCTIONS\n.*?(?=\n# Actors)", _SHORT_INSTRUCTIONS, prompt, flags=re.S
        )
    elif name == "no-agent-bio":
        prompt = re.sub(r"^(.+ \(the assistant, you\)):.*$", r"\1", prompt, flags=re.M)
    return prompt, params


def window_lines(prompt: str) -> list[tuple[str, str]]:
    """The (speaker, text) lines of the prompt's Recent Messages."""
    recent = prompt.rsplit("# Recent Messages", 1)[-1].split("\nAnswer with", 1)[0]
    lines = []
    for line in recent.strip().splitlines():
        speaker, colon, text = line.partition(": ")
        if colon:
            lines.append((re.sub(r"^\(.*?\)\s*", "", speaker).strip(), text.strip()))
    return lines


def conversation_of(
    lines: Sequence[tuple[str, str]], conversations: Sequence[Conversation]
) -> Conversation | None:
    said = {text for _, text in lines}
    for conversation in conversations:
        if said & {t.text for t in conversation.turns}:
            return conversation
    return None


def judge_answer(
    raw: str, lines: Sequence[tuple[str, str]], conversation: Conversation, tally: Tally
) -> None:
    answer = parse_json_object(raw)
    claims = answer.get("claims") if isinstance(answer, dict) else None
    if not isinstance(claims, list):
        tally.unreadable += 1
        return
    speakers = {t.speaker for t in conversation.turns}
    # Grounded in what was said up to this window (a claim may repeat an earlier line);
    # recall counts what this window said.
    window: dict[str, list[str]] = {}
    for speaker, text in lines:
        window.setdefault(speaker, []).append(text)
    last = max(
        (i for i, t in enumerate(conversation.turns) if (t.speaker, t.text) in set(lines)),
        default=len(conversation.turns) - 1,
    )
    said: dict[str, list[str]] = {}
    for turn in conversation.turns[: last + 1]:
        said.setdefault(turn.speaker, []).append(turn.text)
    expect = conversation.expect

    def by_subject(items: Sequence[Any]) -> dict[str, list[list[str]]]:
        found: dict[str, list[list[str]]] = {}
        for item in items:
            found.setdefault(item.subject, []).append(item.contains)
        return found

    judge = FactJudge(
        said=said,
        expected=by_subject(expect.current),
        # The windows are read one after another: the old city was right when it was said.
        stale={},
        never=by_subject(expect.never),
        group=conversation.kind == "group",
        agent_name="Mnemo",
    )
    kept: dict[str, list[str]] = {}
    for claim in claims:
        if not isinstance(claim, dict) or claim.get("change") == "retract":
            continue
        text, subject = str(claim.get("claim", "")), str(claim.get("subject", ""))
        tally.claims += 1
        verdict = judge.verdict(subject, text) if subject in speakers else "not a speaker"
        if verdict is None:
            tally.right += 1
            kept.setdefault(subject, []).append(text.casefold())
        else:
            tally.wrong.append(f"{subject}: {text[:80]} ({verdict})")
    window_text = {s: " ".join(t).casefold() for s, t in window.items()}
    # What was true when said counts too: the old city, said before the move.
    for item in [*expect.current, *expect.stale]:
        if all(part in window_text.get(item.subject, "") for part in item.contains):
            tally.expected += 1
            tally.found += any(
                all(part in fact for part in item.contains) for fact in kept.get(item.subject, [])
            )


async def measure(
    args: argparse.Namespace, conversations: Sequence[Conversation], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    prompts = [r for r in rows if r.get("task") == "facts" and r.get("prompt")]
    if args.limit:
        prompts = prompts[: args.limit]
    client = AsyncOpenAI(api_key="sk-local", base_url=args.endpoint, timeout=args.timeout)
    tallies = {name: Tally() for name in args.variants}
    try:
        for row in prompts:
            lines = window_lines(row["prompt"])
            conversation = conversation_of(lines, conversations)
            if conversation is None:
                continue
            for name in args.variants:
                prompt, params = variant(name, row["prompt"], row.get("params") or {})
                started = time.perf_counter()
                answer = await client.chat.completions.create(
                    model=args.model, messages=[{"role": "user", "content": prompt}], **params
                )
                tally = tallies[name]
                tally.seconds += time.perf_counter() - started
                tally.calls += 1
                tally.words += len(prompt.split())
                content = answer.choices[0].message.content or ""
                tally.answers.append({"seq": row.get("seq"), "content": content})
                judge_answer(content, lines, conversation, tally)
                shown = {k: v for k, v in tally.row(name).items() if k != "answers"}
                print(f"{conversation.name} {name}: {shown}", flush=True)
    finally:
        await client.close()
    return [tally.row(name) for name, tally in tallies.items()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="facts-prompt", description=__doc__.splitlines()[0])
    parser.add_argument("--record", required=True, help="a make bench-live recording (JSONL)")
    parser.add_argument("--endpoint", default="http://127.0.0.1:8088/v1")
    parser.add_argument("--model", default="local-model")
    parser.add_argument("--variants", default=",".join(VARIANTS[:3]))
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--limit", type=int, default=0, help="at most this many prompts")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", default="", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    conversations = load_conversations(Path(args.data))
    lines = Path(args.record).read_text(encoding="utf-8").splitlines()
    recorded = [json.loads(line) for line in lines if line.strip()]
    rows = asyncio.run(measure(args, conversations, recorded))
    text = json.dumps(rows, indent=1, ensure_ascii=False)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
