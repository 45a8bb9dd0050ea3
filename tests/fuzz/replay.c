/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Driver for fuzz targets in builds without libFuzzer: runs LLVMFuzzerTestOneInput on every file of
 * the corpus directories given, then on random and mutated inputs for --seconds=N (default 5).
 * A crash, sanitizer report or abort fails the test; the input that did it is written to
 * ./crash-replay-<pid> first so it can be added to the corpus.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT (1u << 20)
#define MAX_SEEDS 4096

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static size_t nseeds;

static void run_one(const uint8_t *data, size_t size)
{
	/* Keep the current input on disk until it returns, so a crash leaves it behind. */
	char path[64];
	snprintf(path, sizeof(path), "crash-replay-%d", (int)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, data, size) < 0) { /* best effort */ }
		close(fd);
	}
	/* A private copy so reads past the end are caught by the sanitizers. */
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	LLVMFuzzerTestOneInput(copy, size);
	free(copy);
	unlink(path);
}

static void load_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "replay: cannot open corpus %s\n", dir);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) && nseeds < MAX_SEEDS) {
		if (de->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		uint8_t *buf = malloc(REPLAY_MAX_INPUT);
		size_t n = buf ? fread(buf, 1, REPLAY_MAX_INPUT, f) : 0;
		fclose(f);
		if (!buf)
			continue;
		seeds[nseeds] = buf;
		seed_len[nseeds++] = n;
		run_one(buf, n);
	}
	closedir(d);
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

int main(int argc, char **argv)
{
	double seconds = 5;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--seconds=", 10))
			seconds = atof(argv[i] + 10);
		else
			load_dir(argv[i]);
	}
	if (getrandom(&rng_state, sizeof(rng_state), 0) != sizeof(rng_state) || !rng_state)
		rng_state = 0x9e3779b97f4a7c15ull;
	size_t corpus = nseeds;
	static uint8_t buf[65536];
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned long runs = 0;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
			break;
		size_t len;
		if (nseeds && (rnd() & 3)) {
			/* Mutate a seed: flip, overwrite, truncate or extend. */
			size_t s = rnd() % nseeds;
			len = seed_len[s] > sizeof(buf) ? sizeof(buf) : seed_len[s];
			memcpy(buf, seeds[s], len);
			unsigned edits = 1 + rnd() % 8;
			for (unsigned e = 0; e < edits; e++) {
				switch (rnd() % 4) {
				case 0: if (len) buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8)); break;
				case 1: if (len) buf[rnd() % len] = (uint8_t)rnd(); break;
				case 2: if (len) len = rnd() % len; break;
				case 3: if (len < sizeof(buf)) buf[len++] = (uint8_t)rnd(); break;
				}
			}
		} else {
			len = rnd() % 512;
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rnd();
		}
		run_one(buf, len);
		runs++;
	}
	printf("replay: %zu corpus inputs, %lu generated inputs, no crash\n", corpus, runs);
	for (size_t i = 0; i < nseeds; i++)
		free(seeds[i]);
	return 0;
}
