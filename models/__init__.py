"""Models: the from-scratch encoder, pretrained loading, and the attention record.

Dimension letters used in shape comments throughout this package:
B batch, T tokens, L layers, H heads, Q query positions, K key positions,
D model width, Dh head width, F feed-forward width.
"""
