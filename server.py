"""What `./start.sh` and `attention-explorer serve` run: app.py on Streamlit's ASGI server, with
the Plotly chunk imported as a page opens and the default model loaded as the server starts
(ui/serving.py). `streamlit run app.py` serves the same app without either."""

import streamlit as st
from starlette.middleware import Middleware

from ui.serving import PlotlyFirst, warm_up

app = st.App("app.py", lifespan=warm_up, middleware=[Middleware(PlotlyFirst)])
