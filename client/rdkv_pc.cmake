# Writes rdkv.pc at install time (install(CODE) in CMakeLists.txt sets RDKV_PC_IN, RDKV_PC_OUT and
# the PC_* values): the prefix is the one being installed to, `cmake --install --prefix DIR`'s
# included; a relative libdir or includedir is put under ${prefix}.
set(PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(v PC_LIBDIR PC_INCLUDEDIR)
  if(NOT IS_ABSOLUTE "${${v}}")
    set(${v} "\${prefix}/${${v}}")
  endif()
endforeach()
configure_file("${RDKV_PC_IN}" "${RDKV_PC_OUT}" @ONLY)
