"""The `facts` provider: what Mnemo knows about the people in the message, for the prompt.

elizaOS embeds the message and then ignores the embedding (it lists recent facts). Here the
facts about the speaker and the people they mention are ranked by similarity to the message,
falling back to the most recent ones when nothing is relevant, and only facts learned in the
message's own world are ever returned.
"""

from __future__ import annotations

import logging

from bot import Context, Provided, Provider

from .evaluator import settings_of

log = logging.getLogger(__name__)


async def get_facts(ctx: Context) -> Provided:
    settings = settings_of(ctx)
    message = ctx.message
    if settings.relevant_facts <= 0:
        return Provided()
    subjects = list(dict.fromkeys([message.user_id, *message.mentions]))
    facts = await ctx.knowledge.search_facts(
        message.content.text,
        subject_ids=subjects,
        world_id=message.world_id,
        limit=settings.relevant_facts,
    )
    # Scope is the one promise that must never break, whatever the index returns.
    facts = [f for f in facts if f.world_id == message.world_id and f.subject_id in subjects]
    if not facts:
        return Provided(data=[])
    names = await ctx.conversations.display_names(ctx.state, {f.subject_id for f in facts})
    blocks = []
    for subject in subjects:
        about = [f for f in facts if f.subject_id == subject]
        if about:
            lines = "\n".join(f"- {fact.text}" for fact in about)
            blocks.append(f"Facts about {names.get(subject, 'someone')}:\n{lines}")
    # The facts themselves go into the state too (the offline reply lists them).
    headings = [block.partition("\n")[0] for block in blocks]
    return Provided(text="\n\n".join(blocks), data=facts, markup=headings)


facts_provider = Provider(
    name="facts",
    get=get_facts,
    description="Facts about the speaker and the people they mention, most relevant first.",
)
