/* kvbench tpcc (placeholder until the TPC-C workload lands). */
#include <stdio.h>
int cmd_tpcc(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "kvbench tpcc: not built yet\n");
    return 2;
}
