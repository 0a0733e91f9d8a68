/* The sub-commands of the `tg` program. Each takes the arguments after `tg` (argv[0] is the
 * sub-command's name), prints errors to stderr and returns the process exit status. */
#ifndef TG_TOOLS_COMMANDS_H
#define TG_TOOLS_COMMANDS_H

int tg_cmd_prep(int argc, char **argv);
int tg_cmd_train(int argc, char **argv);
int tg_cmd_translate(int argc, char **argv);
int tg_cmd_generate(int argc, char **argv);
int tg_cmd_fill_mask(int argc, char **argv);
int tg_cmd_attention(int argc, char **argv);
int tg_cmd_score(int argc, char **argv);
int tg_cmd_eval(int argc, char **argv);
int tg_cmd_inspect(int argc, char **argv);
int tg_cmd_average(int argc, char **argv);
int tg_cmd_import(int argc, char **argv);
int tg_cmd_export(int argc, char **argv);
int tg_cmd_tokenize(int argc, char **argv);
int tg_cmd_embed(int argc, char **argv);

#endif
