"""People's control over what Mnemo keeps about them: forgetting, export, opt-out, retention."""
