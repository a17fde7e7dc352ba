"""Pieces the distributions share: the standardized variable, the quantile functions' domain,
and nan for parameters outside theirs."""

import math

import vkgrad.numpy as vnp


def standardize(x, loc, scale):
    """(x - loc) / scale."""
    return (vnp.asarray(x) - loc) / scale


def not_probability(q):
    """True where q is no probability (nan, below 0 or above 1): where JAX's ppf's give nan."""
    q = vnp.asarray(q)
    return vnp.isnan(q) | (q < 0) | (q > 1)


def nan_where(bad, value):
    """value, nan where `bad` (JAX's answer for a parameter outside its domain)."""
    return vnp.where(bad, math.nan, value)

