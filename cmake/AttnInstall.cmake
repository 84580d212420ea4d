#===-- cmake/AttnInstall.cmake: install rules and the attn CMake package --===#
#
# `cmake --install <build> --prefix <p>` lays out
#
#   <p>/include/attn, <p>/include/attn-c   public headers (and the .td files),
#                                          with the generated .h.inc files
#   <p>/lib/lib*.a                         the compiler's static libraries
#   <p>/lib/libattn_runtime.so             the runtime's C API
#   <p>/lib/libattn_compiler.so            the compiler's C API
#   <p>/lib/libattn_mlir_c.so              the dialect's C API and MLIR's
#   <p>/bin/attn-opt, attn-compile         the tools
#   <p>/lib/cmake/attn/                    attnConfig.cmake, its version file
#                                          and attnTargets.cmake (attn::*)
#
# so that an out-of-tree project does find_package(attn CONFIG REQUIRED) and
# links attn::<part> (docs/Embedding.md; test/Consumer is the proof). A
# runtime-only build (-DATTN_ENABLE_COMPILER=OFF) installs the runtime's
# headers, libraries and targets alone, and its package needs no MLIR.
#
# Included once from the top-level CMakeLists.txt, after every part: the
# library targets keep their names in the build tree; only their exported
# names (EXPORT_NAME) are attn::<part>.
#
#===----------------------------------------------------------------------===#

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The version lives in include/attn/Version.h alone.
file(STRINGS ${ATTN_SOURCE_DIR}/include/attn/Version.h ATTN_VERSION_LINE
     REGEX "^#define ATTN_VERSION_STRING \"[0-9.]+\"")
string(REGEX REPLACE ".*\"([0-9.]+)\".*" "\\1" ATTN_VERSION "${ATTN_VERSION_LINE}")
# A new version reconfigures, so the package never reports a stale one.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${ATTN_SOURCE_DIR}/include/attn/Version.h)

# `lib`, not GNUInstallDirs' multiarch directory: add_mlir_library installs
# the compiler's archives there too (into MLIR's own, unused, export set).
set(ATTN_INSTALL_LIBDIR lib)
set(ATTN_INSTALL_CMAKEDIR ${ATTN_INSTALL_LIBDIR}/cmake/attn)

#===----------------------------------------------------------------------===#
# The exported targets: build-tree target -> attn::<name>
#===----------------------------------------------------------------------===#
set(ATTN_EXPORTED_TARGETS)
set(ATTN_EXPORTED_NAMES)
function(attn_export target name)
  if(TARGET ${target})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
    set(ATTN_EXPORTED_TARGETS ${ATTN_EXPORTED_TARGETS} ${target} PARENT_SCOPE)
    set(ATTN_EXPORTED_NAMES ${ATTN_EXPORTED_NAMES} attn::${name} PARENT_SCOPE)
  endif()
endfunction()

attn_export(attn_runtime Runtime)             # shared, attn-c/Runtime.h
attn_export(AttnRuntime RuntimeStatic)        # static, attn/Runtime/*.h (attnrt::)
if(ATTN_ENABLE_COMPILER)
  attn_export(MLIRAttnUtils Utils)            # TargetInfo (what each chip offers)
  attn_export(MLIRAttnDialect Dialect)        # the attn dialect
  attn_export(MLIRAttnTransforms Passes)      # attn-prepare-pipeline, outline, ...
  attn_export(AttnConversionAttnToGPU Conversion) # convert-attn-to-gpu
  attn_export(AttnPipelines Pipelines)        # attn-lower-to-nvvm, attn-to-nvvm-pipeline
  attn_export(AttnTarget Target)              # PTX/cubin, ptxas, manifests
  attn_export(AttnCAPICompiler CAPI)          # shared, attn-c/Compiler.h
  attn_export(AttnCAPIDialect CAPIDialect)    # shared, attn-c/Dialect.h + mlir-c/
  attn_export(attn-opt attn-opt)
  attn_export(attn-compile attn-compile)
endif()

# The installed compiler C API and tools find libLLVM where it was found at
# configure time (the runtime needs nothing but libc and libdl).
if(ATTN_ENABLE_COMPILER AND LLVM_LIBRARY_DIR)
  foreach(target AttnCAPICompiler AttnCAPIDialect attn-opt attn-compile)
    if(TARGET ${target})
      set_target_properties(${target} PROPERTIES INSTALL_RPATH "${LLVM_LIBRARY_DIR}")
    endif()
  endforeach()
endif()

if(NOT ATTN_EXPORTED_TARGETS)
  return() # neither the compiler nor the runtime: nothing to install
endif()
install(TARGETS ${ATTN_EXPORTED_TARGETS}
  EXPORT attnTargets
  ARCHIVE DESTINATION ${ATTN_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${ATTN_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

#===----------------------------------------------------------------------===#
# Headers
#===----------------------------------------------------------------------===#
if(ATTN_ENABLE_COMPILER)
  install(DIRECTORY ${ATTN_SOURCE_DIR}/include/attn ${ATTN_SOURCE_DIR}/include/attn-c
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
  # The tablegen'd declarations the headers include (the .cpp.inc
  # definitions are compiled into the libraries).
  install(DIRECTORY ${ATTN_BINARY_DIR}/include/attn
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h.inc"
    PATTERN "CMakeFiles" EXCLUDE)
elseif(ATTN_ENABLE_RUNTIME)
  install(DIRECTORY ${ATTN_SOURCE_DIR}/include/attn/Runtime
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attn FILES_MATCHING PATTERN "*.h")
  install(FILES ${ATTN_SOURCE_DIR}/include/attn/Version.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attn)
  install(FILES ${ATTN_SOURCE_DIR}/include/attn-c/Runtime.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attn-c)
endif()

#===----------------------------------------------------------------------===#
# The package: attnConfig.cmake, attnConfigVersion.cmake, attnTargets.cmake
#===----------------------------------------------------------------------===#
if(ATTN_ENABLE_COMPILER)
  set(ATTN_PACKAGE_HAS_COMPILER ON)
  set(ATTN_PACKAGE_MLIR_DIR "${MLIR_DIR}")
else()
  set(ATTN_PACKAGE_HAS_COMPILER OFF)
  set(ATTN_PACKAGE_MLIR_DIR "")
endif()
if(ATTN_ENABLE_RUNTIME)
  set(ATTN_PACKAGE_HAS_RUNTIME ON)
else()
  set(ATTN_PACKAGE_HAS_RUNTIME OFF)
endif()

install(EXPORT attnTargets
  NAMESPACE attn::
  FILE attnTargets.cmake
  DESTINATION ${ATTN_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${ATTN_SOURCE_DIR}/cmake/attnConfig.cmake.in
  ${ATTN_BINARY_DIR}/cmake/attnConfig.cmake
  INSTALL_DESTINATION ${ATTN_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(
  ${ATTN_BINARY_DIR}/cmake/attnConfigVersion.cmake
  VERSION ${ATTN_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${ATTN_BINARY_DIR}/cmake/attnConfig.cmake
  ${ATTN_BINARY_DIR}/cmake/attnConfigVersion.cmake
  DESTINATION ${ATTN_INSTALL_CMAKEDIR})

string(REPLACE ";" " " ATTN_EXPORTED_NAMES_TEXT "${ATTN_EXPORTED_NAMES}")
message(STATUS "attn: package ${ATTN_VERSION} exports ${ATTN_EXPORTED_NAMES_TEXT}")
