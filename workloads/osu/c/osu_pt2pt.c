/* spotbench's own OSU point-to-point harness in C: osu_latency / osu_bibw semantics and
 * output format, with the same command line as the mpi4py harness (workloads/osu/harness.py):
 *
 *   mpiexec -n 2 osu_pt2pt latency -m MAX -i ITERS --iterations-large N -x WARM
 *                                  --warmup-large N -W WINDOW --large-size BYTES
 *   mpiexec -n 2 osu_pt2pt bibw    ...same flags...
 *
 * latency: blocking ping-pong, sizes 0,1,2,4..MAX, one-way latency = elapsed/(2*iters) us.
 * bibw: per loop both ranks post WINDOW Irecv then WINDOW Isend and Waitall (as osu_bibw);
 * bandwidth = size*window*2*loops/elapsed in MB/s (1 MB = 1e6 bytes). Sizes above
 * --large-size use the *-large counts. Rank 0 prints and flushes one row per size.
 * Built with the mpicc of the mpich wheel by `python -m workloads.osu.cbuild`.
 *
 * --stall-s S (spotbench's heartbeat, off when 0): each rank times the gap between the
 * starts of consecutive timed iterations (its own loop's progress, on its monotonic clock)
 * and how far its monotonic and wall clocks drifted apart over the size; after the size,
 * rank 1 sends its figures to rank 0, which prints one stderr line per size whose gap or
 * drift exceeded S:  spotbench-stall size=N rank=R gap_s=G clock_skew_s=C
 * (a stopped process, a paused VM or a noisy neighbour stalls both ranks' loops), and one
 * line per size with the timed loop's wall-clock window, the window the row's value was
 * timed over (spotbench.timed):  spotbench-timed size=N from=EPOCH to=EPOCH
 * Fault injection (SPOTBENCH_FAULT_EDGES=DIR): rank 0 writes DIR/osu.<benchmark>.<size>.timing
 * as a size's warm-up ends, before its timed loop starts (a fault placed after the file
 * appears lands inside the timed loop).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <signal.h>
#include <math.h>
#include <time.h>

static double now_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void mark_timing(const char *bench, long size) {
    const char *dir = getenv("SPOTBENCH_FAULT_EDGES");
    if (!dir || !*dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/osu.%s.%ld.timing", dir, bench, size);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}

static double argd(int argc, char **argv, const char *a, double dflt) {
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], a) == 0) return atof(argv[i + 1]);
    return dflt;
}

static long arg(int argc, char **argv, const char *a, const char *b, long dflt) {
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], a) == 0 || (b && strcmp(argv[i], b) == 0)) return atol(argv[i + 1]);
    return dflt;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "latency") && strcmp(argv[1], "bibw"))) {
        fprintf(stderr, "usage: osu_pt2pt latency|bibw [-m MAX] [-i N] [--iterations-large N] "
                        "[-x N] [--warmup-large N] [-W N] [--large-size N]\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);  /* die with hydra's proxy: no rank left spinning */
    int lat = strcmp(argv[1], "latency") == 0;
    long max = arg(argc, argv, "-m", "--max-size", 4L << 20);
    long iters = arg(argc, argv, "-i", "--iterations", lat ? 10000 : 100);
    long iters_l = arg(argc, argv, "--iterations-large", NULL, lat ? 1000 : 20);
    long skip = arg(argc, argv, "-x", "--warmup", lat ? 100 : 10);
    long skip_l = arg(argc, argv, "--warmup-large", NULL, lat ? 10 : 2);
    long window = arg(argc, argv, "-W", "--window", 64);
    long large = arg(argc, argv, "--large-size", NULL, 8192);
    double stall = argd(argc, argv, "--stall-s", 0.0);
    if (max < 1 || iters < 1 || iters_l < 1 || window < 1 || skip < 0 || skip_l < 0) {
        fprintf(stderr, "iterations, window and max size must be >= 1\n");
        return 2;
    }
    int rank, nprocs;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs != 2) {
        if (rank == 0) fprintf(stderr, "This test requires exactly two processes\n");
        MPI_Finalize();
        return 2;
    }
    char *s = malloc(max), *r = malloc(max);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * window);
    if (!s || !r || !req) { fprintf(stderr, "out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    memset(s, 'a', max);
    memset(r, 'b', max);
    int peer = 1 - rank;
    if (rank == 0) {
        printf("# OSU MPI %s Test v7.5\n# Datatype: MPI_CHAR.\n%-10s%20s\n",
               lat ? "Latency" : "Bi-Directional Bandwidth", "# Size",
               lat ? "Latency (us)" : "Bandwidth (MB/s)");
        fflush(stdout);
    }
    for (long size = lat ? 0 : 1; size <= max; size = size ? size * 2 : 1) {
        long n = size > large ? iters_l : iters, w = size > large ? skip_l : skip;
        double t0 = 0, beat = 0, gap = 0, mono0 = 0, wall0 = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < n + w; i++) {
            if (i == w) {
                if (rank == 0) mark_timing(argv[1], size);
                t0 = MPI_Wtime();
                mono0 = beat = now_s(CLOCK_MONOTONIC);
                wall0 = now_s(CLOCK_REALTIME);
            } else if (stall > 0 && i > w) {  /* the loop's heartbeat */
                double b = now_s(CLOCK_MONOTONIC);
                if (b - beat > gap) gap = b - beat;
                beat = b;
            }
            if (lat) {
                if (rank == 0) {
                    MPI_Send(s, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(r, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(r, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(s, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
                }
            } else {
                int rtag = rank == 0 ? 10 : 100, stag = rank == 0 ? 100 : 10;
                for (long j = 0; j < window; j++)
                    MPI_Irecv(r, (int)size, MPI_CHAR, peer, rtag, MPI_COMM_WORLD, &req[j]);
                for (long j = 0; j < window; j++)
                    MPI_Isend(s, (int)size, MPI_CHAR, peer, stag, MPI_COMM_WORLD, &req[window + j]);
                MPI_Waitall((int)(2 * window), req, MPI_STATUSES_IGNORE);
            }
        }
        double t = MPI_Wtime() - t0;
        if (stall > 0) {
            double b = now_s(CLOCK_MONOTONIC);
            if (rank == 0)
                fprintf(stderr, "spotbench-timed size=%ld from=%.6f to=%.6f\n", size, wall0,
                        now_s(CLOCK_REALTIME));
            double mine[2] = {b - beat > gap ? b - beat : gap,
                              fabs((now_s(CLOCK_REALTIME) - wall0) - (b - mono0))}, theirs[2];
            if (rank == 1) {
                MPI_Send(mine, 2, MPI_DOUBLE, 0, 77, MPI_COMM_WORLD);
            } else {
                MPI_Recv(theirs, 2, MPI_DOUBLE, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int k = 0; k < 2; k++) {
                    double *f = k ? theirs : mine;
                    if (f[0] > stall || f[1] > stall)
                        fprintf(stderr, "spotbench-stall size=%ld rank=%d gap_s=%.3f clock_skew_s=%.3f\n",
                                size, k, f[0], f[1]);
                }
                fflush(stderr);
            }
        }
        if (rank == 0) {
            double v = lat ? t * 1e6 / (2.0 * n) : size / 1e6 * n * window * 2 / t;
            /* OSU's 2 decimals, more for a value below 0.01 (3 significant digits): a
             * positive measurement is never printed as 0.00 (as workloads/osu/harness.py) */
            int prec = 2;
            for (double x = v * 100; v > 0 && v < 0.01 && x < 100 && prec < 12; x *= 10)
                prec++;
            printf("%-10ld%20.*f\n", size, prec, v);
            fflush(stdout);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(s); free(r); free(req);
    MPI_Finalize();
    return 0;
}
