"""Autofixes: what a finding's fix is (`kinds`: built by rules, no libcst), how fixes are
applied (`apply`: libcst, only for --fix and --diff) and written back (`write`)."""

from cslint.fixes.kinds import cstorch_creation_fix, fold_deprecated_scale_fix, \
    replace_call_fix, multiply_ones_fix, scale_first_argument_fix, scale_foreach_argument_fix, \
    stack_tensors_fix, weight_list_fix

__all__ = ["cstorch_creation_fix", "fold_deprecated_scale_fix", "replace_call_fix",
           "scale_first_argument_fix",
           "scale_foreach_argument_fix", "multiply_ones_fix", "stack_tensors_fix",
           "weight_list_fix"]
