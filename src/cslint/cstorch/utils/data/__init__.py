"""`cstorch.utils.data`: `DataLoader` wraps a loader factory, `DataExecutor` runs the steps."""

from cslint.cstorch.utils.data.data_executor import DataExecutor, current_executor
from cslint.cstorch.utils.data.dataloader import DataLoader

__all__ = ["DataExecutor", "DataLoader", "current_executor"]
