"""llama-cpp-python's OpenAI-compatible server with llama.cpp's extra buffer types off.

Run with the Python of the environment llama-cpp-python is installed in (not Mnemo's): it
imports nothing of Mnemo. `make bench-live` starts it; the arguments are the server's own
(`--model`, `--port`, `--n_ctx`, `--n_threads`, ...).

Why the extra buffer types are off: built with GGML_NATIVE=ON on a CPU that reports AMX, the
server crashed on the first request (SIGSEGV in ggml_backend_amx_mul_mat). With them off the
weights stay in the plain CPU buffer; nothing else changes. A build without the attribute
(older llama-cpp-python) is served as it is.
"""

import runpy

import llama_cpp.llama_cpp as native

_default_params = native.llama_model_default_params


def _params():  # type: ignore[no-untyped-def]
    params = _default_params()
    if hasattr(params, "use_extra_bufts"):
        params.use_extra_bufts = False
    return params


native.llama_model_default_params = _params
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
