"""What a TrainJob and its runtime say, read purely: the runtime's shape, the run policy's values, the
overrides, DRA claims, exclusive placement, volume claims, failure policy and the status server's
injection. The lowest part of the kind: it imports nothing else of :mod:`trainer.trainjob`."""
