# GPT Explorer for a university's own server: one instance per machine (or per container),
# any number of them behind a load balancer. The app keeps nothing beyond a browser session
# (models are rebuilt from config + seed), so replicas need no shared storage or coordination;
# give the load balancer sticky sessions so that one lecture's tab stays on one replica.
#
#   docker build -t gpt-explorer .
#   docker run -p 7860:7860 -e GPT_EXPLORER_MEMORY_MB=4000 gpt-explorer
#
# The same two commands as on a laptop: pip install -r requirements.txt, python app.py.
# Python 3.11 as tested (3.11.7); the minor tag brings Debian's and Python's security fixes.
FROM python:3.11-slim-bookworm

# A C compiler for the optional decoding kernels. They are compiled when the app starts, for the
# CPU the container runs on (-march=native), so they are not built into the image.
# Debian's versions are not pinned: its security updates replace them, and a pin would then fail.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# torch's CPU wheel first (a server without a GPU needs none of the CUDA libraries, about 2 GB):
# 2.13.0+cpu is within requirements.txt's torch range, so the next command keeps it.
COPY requirements.txt .
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
    && pip install -r requirements.txt

# The code stays owned by root: the app cannot change it. It writes only to /tmp (Gradio's
# files, exports) and to its home (~/.cache/gpt-explorer: the compiled kernels).
COPY . .
RUN useradd --create-home --uid 1000 --shell /usr/sbin/nologin explorer
USER 1000

# Listen on every interface inside the container; publish the port to choose who reaches it.
ENV GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    GRADIO_ANALYTICS_ENABLED=False
EXPOSE 7860

# Healthy once the page is served (slim images have no curl; no proxy for the loopback).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:%s/' % os.environ.get('GRADIO_SERVER_PORT', '7860'), timeout=4)"]

CMD ["python", "app.py"]
