"""The ways of stating an aim of one's own that the goals plugin reads beyond English
(plugins/goals/aims.py): each language's "my goal is" and "I want to", and not wanting
someone else to act, nor someone else's goal."""

from __future__ import annotations

from plugins.goals.aims import states_an_aim


def test_each_languages_way_of_stating_an_aim_reads_as_one() -> None:
    stated = [
        "Mein Ziel für dieses Jahr: endlich den Motorradführerschein machen",
        "Mon objectif : courir le marathon de Nantes en avril",
        "minha meta é juntar grana pra fazer um intercâmbio",
        "il mio obiettivo adesso è prendere la patente",
        "Моя цель на этот год — выучить финский",
        "今年の目標は関西弁をマスターすることです",
        "Ο στόχος μου είναι να τρέξω μαραθώνιο",
        "voglio imparare a suonare la chitarra",
    ]
    not_aims = [
        "Ich will, dass du mir hilfst",
        "je veux que tu m'écrives une lettre",
        "Vivo en Sevilla y trabajo de enfermera",
        "Sein Ziel ist es, Profi zu werden",  # someone else's
    ]
    assert [s for s in stated if not states_an_aim(s)] == []
    assert [s for s in not_aims if states_an_aim(s)] == []
