"""The OS login is a handle, never a name: `mnemo chat` run by the login "opslogin" never
shows the model "opslogin" as the person's name, so no stored fact ever says "opslogin's name
is Sarah" or "opslogin lives in Porto". The whole console path (`python -m bot chat`)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.processes import mnemo

LOGIN = "opslogin"
AS_LOGIN = {name: LOGIN for name in ("LOGNAME", "USER", "LNAME", "USERNAME")}


def test_the_login_never_becomes_part_of_a_stored_fact(tmp_path: Path, model_dir: Path) -> None:
    first = mnemo(
        ["chat"],
        "I live in Porto.\nHi, my name is Sarah.\n/facts\n",
        tmp_path,
        model_dir,
        **AS_LOGIN,
    )
    assert first.returncode == 0, first.stderr
    listing = first.stdout.split("Facts (", 1)[1]
    assert "Porto" in listing and "name is Sarah" in listing
    assert LOGIN not in first.stdout
    # The name they told is theirs in the next session; the login still appears nowhere.
    second = mnemo(["chat"], "I have a cat named Pixel.\n/facts\n", tmp_path, model_dir, **AS_LOGIN)
    assert "Sarah has a cat named Pixel — about Sarah" in second.stdout
    assert LOGIN not in second.stdout
