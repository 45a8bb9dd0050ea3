/* SPDX-License-Identifier: Apache-2.0 */
/* cluster_open: the back-end a conninfo names (cluster_store_int.h). Apart from cluster_store.c, which the
 * back-ends use, so that nothing runs in a circle. */
#include <stdio.h>
#include <string.h>

#include "cluster_store_int.h"

#define SQLITE_PREFIX "sqlite:"

bool cluster_conninfo_sqlite(const char *conninfo) { return !strncmp(conninfo, SQLITE_PREFIX, strlen(SQLITE_PREFIX)); }

int cluster_open(const char *conninfo, struct cluster_store **ret, char *err, size_t errlen)
{
	*ret = NULL;
	int e = cluster_conninfo_sqlite(conninfo) ? cluster_sqlite_open(conninfo + strlen(SQLITE_PREFIX), ret)
						  : cluster_pg_open(conninfo, ret);
	if (e < 0)
		snprintf(err, errlen, "%s", cluster_errmsg());
	return e;
}
