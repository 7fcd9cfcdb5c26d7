"""Tests on real parts in process: the bundled MongoDB (the `store` and `mongo_uri` fixtures),
Chroma, the ONNX embedder, `open_test_app`, the fake Discord, Telegram and OpenAI servers. One
folder per package of the code the test is mostly about (`plugins/`: the built-in plugins)."""
