"""What the trainers share, and what their exports share (a foundation: it imports no method code).

`budget` the wall-clock budget (a Lightning callback: the share of the budget spent, the stop, the learning-rate
schedule annealed to it); `sampler` length-grouped batches and a fresh draw each epoch, as DDP shards them;
`distributed` what data needs on several devices (the global batch split, atomic cache writes, a result computed
on rank 0 for all, evaluation sets read whole by every rank); `splits` context-disjoint training / evaluation
splits and the leak check every trained model runs; `exports` what an export records (`router.json`, the
questions it was trained on); `classifier` the frozen embedder + linear head that a classifier export serves
(router letters, CRAG domains); `summary` what `train.py` ends with (the exported epoch beside the untrained
start); `checkpoints` what it reads of its checkpoints (the epoch a resume goes on after, the epoch it exports);
`progress_bar` Lightning's bars as plain lines on a log or a pipe. Submodules are imported directly
(`hoprag.training.budget`), so that no one of them pulls in another's dependencies.
"""
