"""`python -m llama_cpp.server` with llama.cpp's extra weight buffers turned off (`use_extra_bufts`).

llama.cpp repacks weights into extra buffer types for its AMX / repacked CPU kernels by default; on this
project's CPU that code path crashed the server. llama-cpp-python 0.3.36 has no server option for it, so
this wrapper sets the model-parameter default before the server loads the model. Every argument is the
server's own, e.g.

    .venv-servers/bin/python scripts/servers/llama_cpp_server.py --model model.gguf --host 127.0.0.1 --port 8000 \\
        --n_threads 1
"""

from __future__ import annotations

import llama_cpp.llama_cpp as llama_cpp_api
from llama_cpp.server.__main__ import main

_defaults = llama_cpp_api.llama_model_default_params


def _without_extra_buffers():  # a ctypes llama_model_params struct
    params = _defaults()
    params.use_extra_bufts = False
    return params


llama_cpp_api.llama_model_default_params = _without_extra_buffers

if __name__ == "__main__":
    main()
