"""`vigil proxy`: an OpenAI-compatible pass-through in front of any OpenAI-compatible server
(vLLM, SGLang, a hosted API) that samples its traffic into storage like the engine's own."""
