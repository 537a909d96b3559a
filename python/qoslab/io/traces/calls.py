"""Which MPI calls carry no traffic worth replaying: both readers ignore them (neither ops nor
"skipped"), and the time spent inside them is not compute."""

from __future__ import annotations

LOCAL_PREFIXES = (
    "MPI_Type_",
    "MPI_Group_",
    "MPI_Op_",
    "MPI_Keyval_",
    "MPI_Attr_",
    "MPI_Errhandler_",
    "MPI_Error_",
    "MPI_Comm_get_",
    "MPI_Comm_set_",
    "MPI_Comm_call_",
    "MPI_Comm_create_errhandler",
    "MPI_Comm_create_keyval",
    "MPI_Comm_delete_attr",
    "MPI_Comm_free_keyval",
    "MPI_Info_",
    "MPI_Cart",
    "MPI_Graph",
    "MPI_Dist_graph_neighbors",
    "MPI_Pack",
    "MPI_Unpack",
    "MPI_Status_",
    "MPI_T_",
)
LOCAL_CALLS = {
    "MPI_Init",
    "MPI_Init_thread",
    "MPI_Initialized",
    "MPI_Finalize",
    "MPI_Finalized",
    "MPI_Abort",
    "MPI_Comm_rank",
    "MPI_Comm_size",
    "MPI_Comm_remote_size",
    "MPI_Comm_remote_group",
    "MPI_Comm_group",
    "MPI_Comm_compare",
    "MPI_Comm_test_inter",
    "MPI_Comm_free",
    "MPI_Dims_create",
    "MPI_Wtime",
    "MPI_Wtick",
    "MPI_Query_thread",
    "MPI_Is_thread_main",
    "MPI_Address",
    "MPI_Get_address",
    "MPI_Get_count",
    "MPI_Get_elements",
    "MPI_Get_elements_x",
    "MPI_Get_processor_name",
    "MPI_Get_version",
    "MPI_Get_library_version",
    "MPI_Buffer_attach",
    "MPI_Buffer_detach",
    "MPI_Request_free",
    "MPI_Request_get_status",
    "MPI_Reduce_local",
    "MPI_Iprobe",  # a poll: the time it takes is communication time, not compute
    "MPI_Pcontrol",
    # Communicator construction is collective, but carries next to no traffic: no op. (The DUMPI
    # reader still reads it to rebuild the communicators; OTF2 defines them up front.)
    "MPI_Comm_dup",
    "MPI_Comm_dup_with_info",
    "MPI_Comm_split",
    "MPI_Comm_split_type",
    "MPI_Comm_create",
    "MPI_Comm_create_group",
}
# Compute counts from the return of one of these (time before it, around MPI_Initialized say, is not
# the program's).
INIT_CALLS = frozenset({"MPI_Init", "MPI_Init_thread"})
# Completion calls: they produce WAITs for what completed, or nothing when nothing did.
COMPLETION_CALLS = {
    "MPI_Wait",
    "MPI_Waitall",
    "MPI_Waitany",
    "MPI_Waitsome",
    "MPI_Test",
    "MPI_Testall",
    "MPI_Testany",
    "MPI_Testsome",
}


def is_local(name: str) -> bool:
    return name in LOCAL_CALLS or name in COMPLETION_CALLS or name.startswith(LOCAL_PREFIXES)
