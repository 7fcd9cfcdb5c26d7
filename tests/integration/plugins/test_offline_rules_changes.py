"""The offline rules read changes worded in ways the older conversations never used (issue 23:
"stale shown 0 and changes kept 100% on conversations you did not write the rules for").

Each case is worded apart from the memory benchmark's conversations: the rules are checked on
what they generalise to. Full app, offline model, bundled MongoDB, Chroma and the ONNX
embedder, so the core's grounding judges every claim the rules make.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.memory_judge import FactJudge
from bot.llm.reply_checks import ReplyCheck
from bot.memory.claim_sentences import OF_SOMEONE_ELSE
from bot.memory.grounding import Grounding
from bot.testing.harness import TestChat, open_test_app
from plugins.facts import plugin
from plugins.facts.offline import statements
from plugins.facts.offline_changes import slot_of


async def learn_each(chat: TestChat, *texts: str) -> None:
    for text in texts:
        said = chat.message(text)
        await chat.send(said)
        await chat.settle()
        assert await chat.runtime.flush_room(said, timeout=60)


@pytest.mark.parametrize(
    ("before", "after", "now", "gone"),
    [
        # A move said with "we", and with "this is home now".
        ("I live in Leeds.", "We moved to Bristol in March.", "bristol", "leeds"),
        ("I live in Lyon.", "We arrived in Nantes. It's home now!", "nantes", "lyon"),
        # A job that is not an "-er": pilot, lead.
        ("I'm a software engineer.", "New career: I'm a pilot now.", "pilot", "engineer"),
        ("I'm a junior analyst at Acme.", "Big news, I'm a tech lead now!", "tech lead", "junior"),
        ("I'm a nurse in Dublin.", "I retrained, I'm a carpenter now.", "carpenter", "nurse"),
        # A relation corrected: one relation per person named.
        (
            "My sister Maya is visiting.",
            "Oops, Maya is my friend, not my sister.",
            "friend",
            "sister",
        ),
        # An opinion that turned round.
        ("I hate swimming.", "These days I love swimming.", "love", "hate"),
        # How someone gets around.
        ("I take the train to work.", "I take the ferry now.", "ferry", "train"),
        ("I drive a red Honda.", "I sold the Honda last week.", None, "honda"),
        ("I drive a Ford Focus.", "I don't drive anymore.", None, "ford"),
        ("I hate olives.", "I don't hate olives any more.", None, "olives"),
        ("I'm a teacher.", "I'm no longer a teacher.", None, "teacher"),
        ("I'm a student.", "I'm not a student anymore.", None, "student"),
        ("I live in London.", "I moved out of London in May.", None, "london"),
        # A new job or home said another way.
        ("I work at Lidl.", "I just got a new job at Aldi.", "aldi", "lidl"),
        ("I'm a waiter.", "I got a job as a chef.", "chef", "waiter"),
        ("I live in Cork.", "I've moved to Galway.", "galway", "cork"),
        ("I live in Kyiv.", "I'm living in Lviv now.", "lviv", "kyiv"),
        # "I quit teaching" names "teaches history".
        ("I teach history at a college.", "I quit teaching in May.", None, "history"),
    ],
)
async def test_a_change_worded_anew_closes_the_old_value(
    tmp_path: Path,
    mongo_uri: str,
    model_dir: Path,
    before: str,
    after: str,
    now: str | None,
    gone: str,
) -> None:
    async with open_test_app(
        tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime, name="Sam")
        await learn_each(chat, before, after)
        current, _ = await app.store.facts.page(chat.room.world_id)
        history = await app.knowledge.fact_history(chat.account.id, chat.room.world_id)

    texts = [f.text.casefold() for f in current]
    assert not any(gone in text for text in texts), texts
    if now is not None:
        assert any(now in text for text in texts), texts
    closed = [f for f in history if not f.is_current]
    assert any(gone in f.text.casefold() for f in closed), [f.text for f in history]


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("I'm lactose intolerant.", "X is lactose intolerant"),
        ("Honestly I can't stand olives.", "X can't stand olives"),
        ("I don't like horror films.", "X doesn't like horror films"),
        ("I play the violin.", "X plays the violin"),
        ("Zara is my cousin.", "X's cousin is called Zara"),
        ("My husband Omar is a chef.", "X's husband is called Omar"),
        ("I have a brother named Luis.", "X's brother is called Luis"),
        ("My mum is a dentist.", "X's mum is a dentist"),
        ("I'm a vet in Galway.", "X is a vet in Galway"),
        ("I'm a barista at a cafe in Rome.", "X works at a cafe in Rome"),
        ("We have three daughters.", "X has three daughters"),
        ("My uncle Raj lives with me in Pune.", "X lives in Pune with Raj"),
        ("I take the tram everywhere.", "X takes the tram"),
        ("Weirdly, I now love coffee.", "X loves coffee"),
        ("Actually Clara is my grandmother, not my aunt.", "X's grandmother is called Clara"),
    ],
)
def test_new_statements_read(text: str, claim: str) -> None:
    found = [s.template.format(who="X", value=s.value) for s in statements(text)]
    assert claim in found, found


@pytest.mark.parametrize(
    "text",
    [
        "We moved to a bigger flat.",  # no city named: no new home
        "Do I hate running?",  # a question
        "I teach my kids to swim.",  # whom, not a subject
        "My sister is a bit of a worrier.",  # no occupation
        "I'd hate to live there.",
        "I drive a lot for work.",
        "I'd take the train if I could.",
        "That is my wife.",
        "I'm working at home today.",  # no workplace named
        "Sarah is my wife's sister.",  # not the wife
        "Tom is my brother-in-law.",  # not a brother
        "My wife Lena's car broke down.",  # not a name with "'s"
    ],
)
def test_no_claim_from_what_only_looks_like_one(text: str) -> None:
    assert statements(text) == []


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("Owen is a bus driver in Cardiff", ("job", "bus driver")),
        ("Greta works as a team lead", ("job", "team lead")),
        ("Lior's brother is called Amir", ("relation of amir", "brother")),
        ("Owen hates running", ("opinion of running", "hates")),
        ("Tariq takes the bus", ("commute", "bus")),
        # A relative's job is no job of the speaker's: it must not close theirs.
        ("Marta's brother is a firefighter", None),
    ],
)
def test_the_slot_a_fact_fills(text: str, slot: tuple[str, str] | None) -> None:
    assert slot_of(text) == slot


def test_a_relative_named_only_to_deny_it_is_not_who_a_sentence_is_about() -> None:
    grounding = Grounding(agent_names=("Mnemo",))
    said = ["Amir is my cousin, not my brother."]
    judged = grounding.judge(
        "Lior's cousin is called Amir", subject_is_speaker=True, names=["Lior"], said=said
    )
    assert judged is None
    # Still refused when the relative is who the sentence is about.
    about_brother = ["My brother Amir is a cook."]
    assert (
        grounding.judge(
            "Lior is a cook", subject_is_speaker=True, names=["Lior"], said=about_brother
        )
        == OF_SOMEONE_ELSE
    )


def test_home_now_grounds_where_someone_arrived() -> None:
    grounding = Grounding(agent_names=("Mnemo",))
    home = ["We just got to Oslo. This is home now!"]
    trip = ["We just got to Oslo for the weekend."]
    claim = "Kai lives in Oslo"
    assert grounding.judge(claim, subject_is_speaker=True, names=["Kai"], said=home) is None
    assert grounding.judge(claim, subject_is_speaker=True, names=["Kai"], said=trip) is not None


@pytest.mark.parametrize(
    ("subject", "said", "fact"),
    [
        # A verb's "-s" is what "I take", "I play" said.
        ("Tariq", "I sold the Volvo, I take the bus now.", "Tariq takes the bus"),
        ("Farid", "I'm vegan and I play the cello.", "Farid plays the cello"),
        # A short name with "'s" is the subject's own name, not a word they had to say.
        ("Lior", "Amir is my cousin, not my brother.", "Lior's cousin is called Amir"),
    ],
)
def test_the_bench_judge_reads_plurals_and_a_possessive_name(
    subject: str, said: str, fact: str
) -> None:
    judge = FactJudge({subject: [said]}, {}, {}, {}, group=False, agent_name="Mnemo")
    assert judge.verdict(subject, fact) is None
    assert judge.verdict(subject, f"{fact} in Narnia") is not None  # a name never said


@pytest.mark.parametrize(
    "line",
    [
        "I play the drums in a band.",
        "I teach maths at a school in Valencia.",
        "I can't stand cilantro, it tastes like soap to me.",
        "I'm vegan and I play the cello.",
    ],
)
def test_the_acknowledgement_is_not_the_persons_line_back(line: str) -> None:
    ack = " ".join(s.ack for s in statements(line))
    assert ack
    check = ReplyCheck(action_names=(), standing_text=(), person_lines=(line,))
    assert check.problems(ack) == [], ack


@pytest.mark.parametrize("after", ["I'm a runner.", "I'm an optimist.", "I'm a keen cyclist."])
async def test_a_pastime_that_ends_like_a_job_does_not_close_the_job(
    tmp_path: Path, mongo_uri: str, model_dir: Path, after: str
) -> None:
    async with open_test_app(
        tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        chat = TestChat(app.runtime, name="Sam")
        await learn_each(chat, "I work as a nurse.", after)
        current, _ = await app.store.facts.page(chat.room.world_id)

    assert any("nurse" in f.text for f in current), [f.text for f in current]
