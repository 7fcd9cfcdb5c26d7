"""docs/platforms.md says what Telegram's keeping does with a message it could not keep: the
update is held (not confirmed) for MAX_KEEP_ATTEMPTS deliveries, about seven minutes of
polling's pauses, then given up. It used to say polling could not withhold a confirmation."""

from __future__ import annotations

import re

from bot.adapters.telegram.keeping import MAX_KEEP_ATTEMPTS
from bot.adapters.telegram.updates import RETRY_FIRST, RETRY_MAX
from tests.paths import REPO

PLATFORMS_DOC = REPO / "docs" / "platforms.md"


def polling_pauses(attempts: int) -> float:
    """Seconds polling waits in all before the last of `attempts` deliveries of one update
    (the pause before each re-delivery doubles from RETRY_FIRST up to RETRY_MAX)."""
    pause, total = RETRY_FIRST, 0.0
    for _ in range(attempts - 1):
        total += pause
        pause = min(pause * 2, RETRY_MAX)
    return total


def test_the_platforms_page_gives_the_hold_the_code_keeps_before_giving_an_update_up() -> None:
    text = " ".join(PLATFORMS_DOC.read_text().split())
    assert "not withhold" not in text
    held = re.search(r"an update that fails (\d+) times .*? about (\d+) minutes", text)
    assert held is not None, "docs/platforms.md no longer says how long an update is held"
    assert int(held.group(1)) == MAX_KEEP_ATTEMPTS
    assert int(held.group(2)) == round(polling_pauses(MAX_KEEP_ATTEMPTS) / 60)
    assert f"a pause of {RETRY_FIRST:g} s that doubles up to {RETRY_MAX:g} s" in text
    assert f"could not be kept in {MAX_KEEP_ATTEMPTS} attempts" in text
