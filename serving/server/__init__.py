"""`vigil serve`: the OpenAI-compatible HTTP API over the engine.

Build the app with `serving.server.service.app.create_app(settings, engine=None, writer=None)`;
run it with `serving.server.processes.main.run_server(settings)` (uvicorn, graceful drain on
SIGTERM). The rooms, each importing only those below it (an import-linter contract):

- `processes/`: the command, the draining uvicorn server, the API processes and their parent;
- `service/`: the app factory, what it loads when handed nothing, the drain;
- `api/`: the routes, request models and the generation path;
- `base/`: the server's state and seams (`RecordSink`), errors, auth, SSE and send helpers;
- `metrics/`: Prometheus metrics, one process or several.
"""
