"""Template of the generated frontier-scan kernel's body (filled in by :mod:`.backend_numba`).

The kernel walks the (width, experts) blocks ``pos … stop-1`` of a space (a block: every (layers, vocab/tied)
combination; flat index ``block·nl·nv + il·nv + iv``) in a loop nest where each statement of cost model and law sits
at the outermost level its inputs allow. It checks feasibility (finite loss, every budget as a ceiling ``bcol`` ≤
``bval``), keeps ``stats`` (evaluated, feasible, best index/loss/latency, best-any index/loss/latency, the smallest
value of each budget's column (3 slots), the least violating point's ratio and index, where to resume, survivors)
and writes out the points that can still be on the frontier (``out_idx``, objectives in ``out_val``):

* 2 objectives: a staircase over loss bins. ``stair[b]`` holds the smallest second objective of any feasible
  point seen whose loss falls in bin b; bins are monotone in loss, so a point whose second objective is ≥ the
  minimum over strictly lower bins is dominated (strictly lower loss, no worse second objective) and dropped.
  Only dominated points are dropped: the frontier of the survivors is exact.
* more objectives: feasible points with finite objectives are compacted (the caller filters them exactly).

Scratch arrays are arguments (:meth:`.backend_numba.Kernels.scan`; the kernel allocates nothing).
"""

#: The kernel's body (its arguments: :func:`.numba_native.spec`).
SCAN = """
{FIXED}
    nv, nl, nm = radix[0], radix[1], radix[2]
{PRE}
    blk = nl * nv
    C = max(8192, blk)
    nb = stair.shape[0]
    lo, hi = lohi[0], lohi[1]
    scale = nb / (hi - lo) if hi > lo else 0.0
    k = obj.shape[0]
    nbud = bcol.shape[0]
    f1, f2, bi, ix = sf[0], sf[1], si[0], si[1]
    nout = 0
    cap = out_idx.shape[0]
    m = 0
    while pos < stop and nout + C + 2 * blk <= cap:
        iw = pos // nm
        im = pos - iw * nm
{BLOCK}
        for il in range(nl):
{LAYER}
            for iv in range(nv):
                idx = pos * blk + il * nv + iv
{LOSS}
                stats[0] += 1.0
                if not math.isfinite(loss):
                    continue
{POINT}
                lat = v[latc]
                if loss < stats[6] or (loss == stats[6] and lat < stats[7]):
                    stats[5], stats[6], stats[7] = idx, loss, lat
                feas = True
                ratio = -np.inf
                for j in range(nbud):
                    x = v[bcol[j]]
                    if x < stats[8 + j]:
                        stats[8 + j] = x
                    q = x / bval[j]
                    if q > ratio:
                        ratio = q
                    if not (x <= bval[j]):
                        feas = False
                if ratio < stats[11]:
                    stats[11], stats[12] = ratio, idx
                if not feas:
                    continue
                stats[1] += 1.0
                if loss < stats[3] or (loss == stats[3] and lat < stats[4]):
                    stats[2], stats[3], stats[4] = idx, loss, lat
                finite = True
                for j in range(1, k):
                    if v[obj[j]] != v[obj[j]]:
                        finite = False
                if not finite:
                    continue
                if k == 2:
                    b = int((loss - lo) * scale) if scale > 0.0 else 0
                    b = min(max(b, 0), nb - 1)
                    y = v[obj[1]]
                    f1[m], f2[m], bi[m], ix[m] = loss, y, b, idx
                    if y < stair[b]:
                        stair[b] = y
                    m += 1
                else:
                    out_idx[nout] = idx
                    for j in range(k):
                        out_val[nout, j] = v[obj[j]]
                    nout += 1
        pos += 1
        if k == 2 and m > 0 and (m >= C or pos >= stop or nout + C + 2 * blk > cap):
            run = np.inf
            for b in range(nb):
                pre[b] = run
                if stair[b] < run:
                    run = stair[b]
            for j in range(m):
                if pre[bi[j]] > f2[j]:
                    out_idx[nout] = ix[j]
                    out_val[nout, 0] = f1[j]
                    out_val[nout, 1] = f2[j]
                    nout += 1
            m = 0
    stats[13] = pos
    stats[14] = nout
"""
