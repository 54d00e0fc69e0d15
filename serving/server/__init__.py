"""`vigil serve`: the OpenAI-compatible HTTP API over the engine.

Build the app with `serving.server.app.create_app(settings, engine=None, writer=None)`; run it
with `serving.server.main.run_server(settings)` (uvicorn, graceful drain on SIGTERM).
"""
