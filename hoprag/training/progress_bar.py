"""Lightning's progress bars on a log or a pipe, as hoprag's other loops show there (`hoprag.utils.progress`).

Lightning's own bar redraws with carriage returns on stdout, which a log keeps as one ever-growing line; this
one makes each of its bars a `LineBar`: one plain line at most every `progress.INTERVAL` seconds (epoch,
batches, loss) and the bar's final state. `train.py` adds it when progress shows as lines.
"""

from __future__ import annotations

import sys

from lightning.pytorch.callbacks import TQDMProgressBar

from hoprag.utils import progress


class LineProgressBar(TQDMProgressBar):
    """`TQDMProgressBar` whose training, validation, test and prediction bars are `progress.LineBar`s on stderr."""

    def _line_bar(self, desc: str, leave: bool) -> progress.LineBar:
        return progress.LineBar(desc=desc, total=None, unit="batch", leave=leave, disable=self.is_disabled,
                                file=sys.stderr)  # fmt: skip

    def init_sanity_tqdm(self) -> progress.LineBar:
        return self._line_bar(self.sanity_check_description, leave=False)

    def init_train_tqdm(self) -> progress.LineBar:
        return self._line_bar(self.train_description, leave=True)

    def init_validation_tqdm(self) -> progress.LineBar:
        return self._line_bar(self.validation_description, leave=self.trainer.state.fn == "validate")

    def init_test_tqdm(self) -> progress.LineBar:
        return self._line_bar("Testing", leave=True)

    def init_predict_tqdm(self) -> progress.LineBar:
        return self._line_bar(self.predict_description, leave=True)
