/* SPDX-License-Identifier: Apache-2.0 */
/* `space serve`: the thread that keeps templates' warm pools full (space_warm_pool_fill). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve_pool.h"
#include "space.h"

/* A hand-out is noticed within this long; a fill with nothing to do is one small query. */
#define SERVE_POOL_INTERVAL_MS 1000

struct serve_pool {
	const char *state_dir;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
};

static void *pool_thread(void *arg)
{
	struct serve_pool *p = arg;
	struct space_ctx_options o = SPACE_CTX_OPTIONS_INIT;
	o.state_dir = p->state_dir;
	space_ctx *ctx = NULL;
	if (space_ctx_new(&o, &ctx) < 0)
		return NULL;
	char last[512] = "";
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		pthread_mutex_unlock(&p->lock);
		int n = space_warm_pool_fill(ctx, NULL);
		if (n > 0)
			fprintf(stderr, "space serve: warm pools: %d sandbox%s made ready\n", n, n == 1 ? "" : "es");
		/* The same failure every second is said once. */
		if (n < 0 && strcmp(last, space_ctx_last_error(ctx)))
			fprintf(stderr, "space serve: warm pools: %s\n", space_ctx_last_error(ctx));
		snprintf(last, sizeof(last), "%s", n < 0 ? space_ctx_last_error(ctx) : "");
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += (long)SERVE_POOL_INTERVAL_MS * 1000000L;
		t.tv_sec += t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&p->lock);
		if (!p->stop)
			pthread_cond_timedwait(&p->cond, &p->lock, &t);
	}
	pthread_mutex_unlock(&p->lock);
	space_ctx_free(ctx);
	return NULL;
}

int serve_pool_start(const char *state_dir, struct serve_pool **ret)
{
	struct serve_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->state_dir = state_dir;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	int e = pthread_create(&p->thread, NULL, pool_thread, p);
	if (e) {
		pthread_mutex_destroy(&p->lock);
		pthread_cond_destroy(&p->cond);
		free(p);
		return -e;
	}
	*ret = p;
	return 0;
}

void serve_pool_stop(struct serve_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}
