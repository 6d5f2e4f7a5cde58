"""The engines that serve a language model: in this process (``static``, ``transformers``' continuous batching,
``vllm``) or as a client of a server elsewhere (``endpoint``). The seam they share is :mod:`.base`."""
