/* SPDX-License-Identifier: Apache-2.0 */
/* space doctor: what works on this host, what does not, and how to fix it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cmd_doctor(struct cli *cli, int argc, char **argv)
{
	const struct cli_command *cmd = cli_find_command("doctor");
	if (cli_wants_help(argc, argv))
		return cli_help(cmd);
	/* --verbose is also the global option (-v), which the command line parser takes before us. */
	unsigned flags = cli->verbose ? SPACE_DOCTOR_VERBOSE : 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--verbose"))
			flags |= SPACE_DOCTOR_VERBOSE;
		else
			return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
	}
	char *out = NULL;
	int r = space_doctor(cli_ctx(cli), flags, &out);
	if (r < 0)
		return cli_fail(cli, r, "doctor");
	cJSON *j = cJSON_Parse(out);
	free(out);
	if (!j)
		return cli_fail(cli, -ENOMEM, "doctor");
	bool vm_ok = cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "vm"), "usable"));
	bool jail_ok = cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "jail"), "usable"));
	if (cli->json) {
		cli_print_json(j);
		return vm_ok || jail_ok ? EXIT_OK : EXIT_FAIL;
	}
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "checks")) {
		const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
		const char *fix = cJSON_GetStringValue(cJSON_GetObjectItem(c, "fix"));
		printf("%-5s %-13s %s\n", st && !strcmp(st, "ok") ? "ok" : st && !strcmp(st, "warn") ? "warn" : "FAIL",
		       cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")),
		       cJSON_GetStringValue(cJSON_GetObjectItem(c, "detail")));
		if (fix && st && strcmp(st, "ok"))
			printf("      %-13s fix: %s\n", "", fix);
	}
	printf("\nvm isolation:   %s\njail isolation: %s\n",
	       cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "vm"), "summary")),
	       cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "jail"), "summary")));
	cJSON_Delete(j);
	return vm_ok || jail_ok ? EXIT_OK : EXIT_FAIL;
}
