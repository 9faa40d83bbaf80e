"""`cstorch.utils`: the data pipeline (`cstorch.utils.data`)."""

from cslint.cstorch.utils import data

__all__ = ["data"]
