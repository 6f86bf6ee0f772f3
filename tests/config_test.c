// tests/config_test.c: config/*.h, config/ds_config.h and train/loss_scaler.h without a model,
// for tests/test_config.sh (which compares the output with tests/deepspeed_ref.py):
//   config_test lr [trainer flags]           the learning rate of every step: "step lr" per line
//   config_test batch WORLD [trainer flags]  DeepSpeed's batch rules: "micro accum total", or the error
//   config_test scaler SEQ [trainer flags]   the fp16 block's loss scaler (from --config) over SEQ, a
//                                            string of 0/1 overflow flags: "step overflow verdict scale
//                                            hysteresis" per step; stops at LOSS_SCALER_AT_MIN
//   config_test resolved [trainer flags]     the resolved configuration, printed and as the JSONL record
#include "util/common.h"
#include "config/flags.h"
#include "train/loss_scaler.h"

int main(int argc, char **argv) {
    if (argc < 2) fatal("usage: config_test lr|batch|scaler|resolved ...");
    const char *mode = argv[1];
    int skip = strcmp(mode, "batch") == 0 || strcmp(mode, "scaler") == 0 ? 2 : 1;   // mode and its argument
    if (argc < 1 + skip) fatal("%s: missing argument", mode);
    // the trainer's parser sees argv[0] and the trainer flags
    char **rest = (char **)xmalloc((argc - skip) * sizeof(char *), "argv");
    rest[0] = argv[0];
    for (int i = 1 + skip; i < argc; i++) rest[i - skip] = argv[i];
    TrainConfig c;
    parse_args(&c, argc - skip, rest, 1);
    if (strcmp(mode, "lr") == 0) {
        for (int it = 0; it < c.steps; it++) printf("%d %.9g\n", it + 1, (double)lr_at(&c, it, c.steps));
    } else if (strcmp(mode, "batch") == 0) {
        config_resolve_batch(&c, flag_int("WORLD", argv[2], 1, 1 << 20));
        printf("%d %d %d\n", c.B, c.accum, c.total_batch);
    } else if (strcmp(mode, "scaler") == 0) {
        LossScaler s;
        loss_scaler_init(&s, c.loss_scale, c.initial_scale_power, c.loss_scale_window, c.hysteresis,
                         c.consecutive_hysteresis, c.min_loss_scale);
        const char *seq = argv[2];
        for (int i = 0; seq[i]; i++) {
            if (seq[i] != '0' && seq[i] != '1') fatal("scaler: SEQ must be 0s and 1s");
            int verdict = loss_scaler_update(&s, seq[i] == '1');
            printf("%d %c %d %.17g %d\n", i + 1, seq[i], verdict, s.scale, s.cur_hysteresis);
            if (verdict == LOSS_SCALER_AT_MIN) break;
        }
        printf("skipped %lld\n", s.skipped);
    } else if (strcmp(mode, "resolved") == 0) {
        config_resolve_batch(&c, 1);
        config_print_resolved(&c, stdout);
        cJSON *r = config_json_record(&c);
        char *text = cJSON_PrintUnformatted(r);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(r);
    } else {
        fatal("unknown mode '%s' (lr, batch, scaler, resolved)", mode);
    }
    free(rest);
    return 0;
}
