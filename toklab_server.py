"""The app's server: Streamlit's `st.App` running app.py, plus the file route that streams workspace downloads
(`ui/file_route.py`). `scripts/serve.py` (what `scripts/start.sh` runs) starts it with `streamlit run
toklab_server.py`; Streamlit finds the `App` below and serves it with uvicorn, with the same options as before."""

from streamlit.starlette import App

from ui.file_route import routes

app = App("app.py", routes=routes())
