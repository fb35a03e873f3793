"""The training lab, chapter 5's loop for many sessions at once:

- ``setup``: what is trained (corpus, variants, settings) and within which limits;
- ``run``: one variant's run; ``job``: variants side by side, Stop and Continue;
- ``lab``: the server's jobs, shared between the sessions that ask for the same one;
- ``views``: their plain data for the page; ``replay``: a finished job's view at an earlier step;
- ``copying_task``: the copying task (induction heads), a corpus of its own;
- ``gpu_chunks``: a job trained in chunks on a GPU lent per call (ZeroGPU)."""
