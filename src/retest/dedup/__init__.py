"""Near-duplicate search: exact kNN, SSIM, warp-tolerant L2 and the review rules."""
