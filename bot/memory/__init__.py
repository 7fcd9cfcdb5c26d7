"""What Mnemo knows about people: facts, the claims they come from, the checks a claim passes
before it is stored, and how a newer fact replaces an older one."""
