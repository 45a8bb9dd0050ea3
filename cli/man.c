/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `space help --man`: the options and commands of space(1) in roff, from the command table that `space --help`
 * and `space NAME --help` print, so the manual page cannot say something else. The prose around them is
 * docs/man/space.1.in; docs/man/mkman.sh puts the two together at build time.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Text as roff: a backslash and a minus are escaped, and a line starting with a control character is not one. */
static void roff_text(FILE *f, const char *s)
{
	bool line_start = true;
	for (; *s; s++) {
		if (line_start && (*s == '.' || *s == '\''))
			fputs("\\&", f);
		line_start = *s == '\n';
		if (*s == '\\')
			fputs("\\e", f);
		else if (*s == '-')
			fputs("\\-", f);
		else
			fputc(*s, f);
	}
}

/* A block as the terminal shows it: no filling, no adjusting, its own line breaks and indents. */
static void roff_block(FILE *f, const char *prefix, const char *s)
{
	fputs(".PP\n.nf\n", f);
	if (prefix)
		roff_text(f, prefix);
	roff_text(f, s);
	if (s[0] && s[strlen(s) - 1] != '\n')
		fputc('\n', f);
	fputs(".fi\n", f);
}

int cli_man(FILE *f)
{
	size_t n;
	const struct cli_command *cmds = cli_commands(&n);
	fputs(".SH OPTIONS\nThese global options may stand anywhere on the command line before \\fB\\-\\-\\fR.\n", f);
	for (size_t i = 0; cli_global_options[i][0]; i++) {
		fputs(".TP\n.B ", f);
		roff_text(f, cli_global_options[i][0]);
		fputc('\n', f);
		roff_text(f, cli_global_options[i][1]);
		fputc('\n', f);
	}
	fputs(".SH COMMANDS\n\\fBspace \\fICOMMAND\\fB \\-\\-help\\fR prints what a command's section says here.\n", f);
	for (size_t i = 0; i < n; i++) {
		if (!cmds[i].usage)
			continue; /* hidden */
		fputs(".SS space ", f);
		roff_text(f, cmds[i].name);
		fputc('\n', f);
		roff_text(f, cmds[i].summary);
		fputs(".\n", f);
		roff_block(f, "space ", cmds[i].usage);
		if (cmds[i].help)
			roff_block(f, NULL, cmds[i].help);
	}
	return ferror(f) || fflush(f) ? -EIO : 0;
}
