"""GPT Explorer: `python app.py` serves the app at http://127.0.0.1:7860 (see README)."""
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home: works offline

from explorer.app.server import main  # noqa: E402

if __name__ == "__main__":
    main()
